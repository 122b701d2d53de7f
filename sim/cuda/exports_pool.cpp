// Stream-ordered allocation and memory pools ([CH] "Stream Ordered Memory
// Allocator"; design §1, "Facts behind the rules"). Each device has a default
// pool, current until cuDeviceSetMemPool names another. A pool reserves
// device memory in steps of TESSERA_SIM_CUDA_POOL_STEP (default one 2 MiB
// granule; what the device is charged), keeps freed
// memory reserved up to its release threshold, releases the excess at the
// next stream or context synchronize, and gives back all it can at
// cuMemPoolTrimTo. Pool memory belongs to no context. Streams: NULL,
// CU_STREAM_LEGACY and CU_STREAM_PER_THREAD on the current context's device,
// a created stream on its own context's.
// sim: a pool is a bag of bytes (no fragmentation); frees complete at once.
#include "entry.hpp"

using namespace tessera_cuda_sim;

namespace {

// [CH] under stream capture an allocation is a graph allocation node of the
// capture, on the pool's device; it takes no memory until the graph runs.
CUresult captured_alloc(Driver& d, Graph& capture, CUdevice device, std::uint64_t bytes, CUdeviceptr& out) {
  const CUdeviceptr addr = d.graph_addresses(bytes);
  if (!addr) return CUDA_ERROR_OUT_OF_MEMORY;
  d.add_node(&capture, GraphNode{kGraphNodeMemAlloc, device, bytes, addr});
  out = addr;
  return CUDA_SUCCESS;
}

CUresult alloc_async(CUdeviceptr* dptr, std::size_t bytes, CUstream stream) {
  return initialized([&](Driver& d) {
    if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;  // sim: 0 bytes as cuMemAlloc
    Context* c = nullptr;
    if (CUresult r = stream_context(d, stream, c); r != CUDA_SUCCESS) return r;
    if (Graph* capture = capture_of(d, stream)) return captured_alloc(d, *capture, c->device, bytes, *dptr);
    // [CH] from the pool current to the stream's device.
    return d.pool_allocate(d.current_pool(c->device), bytes, *dptr);
  });
}

CUresult alloc_from_pool_async(CUdeviceptr* dptr, std::size_t bytes, CUmemoryPool pool, CUstream stream) {
  return initialized([&](Driver& d) {
    if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    Context* c = nullptr;
    if (CUresult r = stream_context(d, stream, c); r != CUDA_SUCCESS) return r;
    Pool* p = d.usable_pool(pool);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if (Graph* capture = capture_of(d, stream)) return captured_alloc(d, *capture, p->device, bytes, *dptr);
    return d.pool_allocate(p, bytes, *dptr);  // [CH] the pool may be another device's
  });
}

// sim: a pointer from cuMemAlloc/AllocManaged is freed at once as by cuMemFree.
// Under capture only a graph allocation can be freed (a free node).
CUresult free_async(CUdeviceptr p, CUstream stream) {
  return initialized([&](Driver& d) {
    Context* c = nullptr;
    if (CUresult r = stream_context(d, stream, c); r != CUDA_SUCCESS) return r;
    if (Graph* capture = capture_of(d, stream)) {
      if (!d.is_graph_allocation(p)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
      d.add_node(capture, GraphNode{kGraphNodeMemFree, 0, 0, p});
      return CUDA_SUCCESS;
    }
    return d.free(p);  // INVALID_VALUE for an address not handed out (or freed already)
  });
}

}  // namespace

TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_DEVICE;  // [CH]
    *pool_out = reinterpret_cast<CUmemoryPool>(d.default_pool(dev));
    return CUDA_SUCCESS;
  });
}

// [CH] lists only INVALID_VALUE, for a bad device too.
TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!pool || !valid_device(d, dev)) return CUDA_ERROR_INVALID_VALUE;
    *pool = reinterpret_cast<CUmemoryPool>(d.current_pool(dev));
    return CUDA_SUCCESS;
  });
}

// [CH] "The memory pool must be local to the specified device."
TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_VALUE;
    Pool* p = d.usable_pool(pool);
    if (!p || p->device != dev) return CUDA_ERROR_INVALID_VALUE;
    d.set_current_pool(dev, p);
    return CUDA_SUCCESS;
  });
}

// CUDA 13's location-keyed forms ([CH] cuMemGetDefaultMemPool,
// cuMemGetMemPool, cuMemSetMemPool): for a device location and a pinned
// allocation type they are the device forms above ("the equivalent of
// calling cuDeviceSetMemPool with the location id as the device"); a type
// other than PINNED or MANAGED, or a location the type does not take, is
// INVALID_VALUE. sim: host and managed pools are not modelled (not device
// memory the quota holds): NOT_SUPPORTED.
namespace {
CUresult device_location(Driver& d, const CUmemLocation* location, CUmemAllocationType type, CUdevice& dev) {
  if (!location) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_ALLOCATION_TYPE_PINNED && type != CU_MEM_ALLOCATION_TYPE_MANAGED) return CUDA_ERROR_INVALID_VALUE;
  switch (location->type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (!valid_device(d, location->id)) return CUDA_ERROR_INVALID_VALUE;
      if (type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_NOT_SUPPORTED;
      dev = location->id;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      return CUDA_ERROR_NOT_SUPPORTED;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}
}  // namespace

TESSERA_CUDA_SIM_EXPORT CUresult cuMemGetDefaultMemPool(CUmemoryPool* pool_out, CUmemLocation* location,
                                                        CUmemAllocationType type) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    CUdevice dev = 0;
    if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = device_location(d, location, type, dev); r != CUDA_SUCCESS) return r;
    *pool_out = reinterpret_cast<CUmemoryPool>(d.default_pool(dev));
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    CUdevice dev = 0;
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = device_location(d, location, type, dev); r != CUDA_SUCCESS) return r;
    *pool = reinterpret_cast<CUmemoryPool>(d.current_pool(dev));
    return CUDA_SUCCESS;
  });
}

// [CH] "the location parameter should be the same as the location of the
// pool": INVALID_VALUE otherwise.
TESSERA_CUDA_SIM_EXPORT CUresult cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type, CUmemoryPool pool) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    CUdevice dev = 0;
    if (CUresult r = device_location(d, location, type, dev); r != CUDA_SUCCESS) return r;
    Pool* p = d.usable_pool(pool);
    if (!p || p->device != dev) return CUDA_ERROR_INVALID_VALUE;
    d.set_current_pool(dev, p);
    return CUDA_SUCCESS;
  });
}

// [CH] a pinned pool; HOST_NUMA_CURRENT is INVALID_VALUE. sim: only device
// pools are modelled (host pools are not device memory): HOST and HOST_NUMA
// are NOT_SUPPORTED; a device location with a bad ordinal is INVALID_VALUE.
// maxSize, when not 0, bounds the pool's reservation.
TESSERA_CUDA_SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    switch (poolProps->location.type) {
      case CU_MEM_LOCATION_TYPE_DEVICE:
        break;
      case CU_MEM_LOCATION_TYPE_HOST:
      case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return CUDA_ERROR_NOT_SUPPORTED;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!valid_device(d, poolProps->location.id)) return CUDA_ERROR_INVALID_VALUE;
    *pool = reinterpret_cast<CUmemoryPool>(d.create_pool(poolProps->location.id, poolProps->maxSize));
    return CUDA_SUCCESS;
  });
}

// [CH] a default pool cannot be destroyed; one with outstanding allocations
// is destroyed at once and its memory freed with the last of them.
TESSERA_CUDA_SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    Pool* p = d.usable_pool(pool);
    if (!p || p->is_default) return CUDA_ERROR_INVALID_VALUE;
    return d.pool_destroy(p);
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, std::size_t minBytesToKeep) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    Pool* p = d.usable_pool(pool);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    return d.pool_trim(p, minBytesToKeep);
  });
}

// [CH] settable: the release threshold (cuuint64_t), the three REUSE_*
// switches (int), and the two high watermarks, which "can only be reset to
// zero" (sim: a reset watermark restarts from the current value). The
// current figures are read-only (INVALID_VALUE).
TESSERA_CUDA_SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    Pool* p = d.usable_pool(pool);
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    auto u64 = static_cast<const cuuint64_t*>(value);
    switch (attr) {
      case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *static_cast<const int*>(value) ? 1 : 0;
        return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        p->threshold = *u64;  // takes effect at the next synchronize
        return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (*u64 != 0) return CUDA_ERROR_INVALID_VALUE;
        p->reserved_high = p->reserved;
        return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*u64 != 0) return CUDA_ERROR_INVALID_VALUE;
        p->used_high = p->used;
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    Pool* p = d.usable_pool(pool);
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    auto u64 = static_cast<cuuint64_t*>(value);
    switch (attr) {
      case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *static_cast<int*>(value) = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *u64 = p->threshold; return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *u64 = p->reserved; return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *u64 = p->reserved_high; return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *u64 = p->used; return CUDA_SUCCESS;
      case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *u64 = p->used_high; return CUDA_SUCCESS;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, std::size_t bytesize, CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return alloc_async(dptr, bytesize, hStream);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, std::size_t bytesize, CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return alloc_async(dptr, bytesize, hStream);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, std::size_t bytesize, CUmemoryPool pool,
                                                         CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return alloc_from_pool_async(dptr, bytesize, pool, hStream);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, std::size_t bytesize,
                                                              CUmemoryPool pool, CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return alloc_from_pool_async(dptr, bytesize, pool, hStream);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return free_async(dptr, hStream);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return free_async(dptr, hStream);
}
