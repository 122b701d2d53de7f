// Virtual memory management ([CH] "Virtual Memory Management"; design §1):
// cuMemCreate makes physical memory, charged only for a device location;
// cuMemAddressReserve takes addresses, charged nothing; cuMemMap/cuMemUnmap
// count each allocation's mappings; a handle is a reference to its
// allocation (cuMemRetainAllocationHandle adds one through the handle that
// mapped an address, cuMemImportFromShareableHandle makes a new handle with
// its own), and the memory is freed when every reference is released and its
// last mapping unmapped. None of it belongs to a context.
#include <unistd.h>

#include "entry.hpp"

using namespace tessera_cuda_sim;

namespace {

// [CH] cuMemCreate's properties: a pinned allocation; a device location (id a
// valid ordinal, else INVALID_DEVICE), a host or host-NUMA one (not device
// memory: charged nothing); HOST_NUMA_CURRENT and host locations asking for
// shareable handles are INVALID_VALUE. sim: other location types too.
CUresult check_prop(const Driver& d, const CUmemAllocationProp* prop, bool& device_memory) {
  if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (!valid_device(d, prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
      device_memory = true;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_INVALID_VALUE;
      device_memory = false;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

std::uint64_t host_page() {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<std::uint64_t>(p) : 4096;
}

}  // namespace

// sim: the granularity is 2 MiB, minimum and recommended alike.
TESSERA_CUDA_SIM_EXPORT CUresult cuMemGetAllocationGranularity(std::size_t* granularity,
                                                               const CUmemAllocationProp* prop,
                                                               CUmemAllocationGranularity_flags option) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!granularity) return CUDA_ERROR_INVALID_VALUE;
    if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
      return CUDA_ERROR_INVALID_VALUE;
    bool device_memory = false;
    if (CUresult r = check_prop(d, prop, device_memory); r != CUDA_SUCCESS) return r;
    *granularity = kGranule;
    return CUDA_SUCCESS;
  });
}

// [CH] size a multiple of the minimum granularity; flags must be zero.
TESSERA_CUDA_SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size,
                                             const CUmemAllocationProp* prop, unsigned long long flags) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!handle || flags != 0 || size == 0 || size % kGranule != 0) return CUDA_ERROR_INVALID_VALUE;
    bool device_memory = false;
    if (CUresult r = check_prop(d, prop, device_memory); r != CUDA_SUCCESS) return r;
    return d.vmm_create(prop->location.id, device_memory, size, prop->requestedHandleTypes, *handle);
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) { return d.vmm_release(handle); });
}

// [CH] size a multiple of the host page size, alignment a power of two or 0,
// flags zero; addr is a hint (sim: ignored).
TESSERA_CUDA_SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment,
                                                     CUdeviceptr addr, unsigned long long flags) {
  TESSERA_CUDA_SIM_COUNT();
  (void)addr;
  return initialized([&](Driver& d) {
    if (!ptr || flags != 0 || size == 0 || size % host_page() != 0) return CUDA_ERROR_INVALID_VALUE;
    if (alignment & (alignment - 1)) return CUDA_ERROR_INVALID_VALUE;
    return d.vmm_reserve(size, alignment, *ptr);
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, std::size_t size) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) { return d.vmm_address_free(ptr, size); });
}

// [CH] ptr and size multiples of the granularity, offset "currently must be
// zero", flags zero.
TESSERA_CUDA_SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, std::size_t size, std::size_t offset,
                                          CUmemGenericAllocationHandle handle, unsigned long long flags) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (flags != 0 || offset != 0 || size == 0 || size % kGranule != 0 || ptr % kGranule != 0)
      return CUDA_ERROR_INVALID_VALUE;
    return d.vmm_map(ptr, size, handle);
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, std::size_t size) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    return d.vmm_unmap(ptr, size);
  });
}

// [CH] cuMemSetAccess: PyTorch's expandable segments call it after every map.
TESSERA_CUDA_SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc,
                                                std::size_t count) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) { return d.vmm_set_access(ptr, size, desc, count); });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    return d.vmm_retain(reinterpret_cast<CUdeviceptr>(addr), *handle);
  });
}

// [CH] flags must be zero; for a POSIX file descriptor, shareableHandle points to an int.
TESSERA_CUDA_SIM_EXPORT CUresult cuMemExportToShareableHandle(void* shareableHandle,
                                                              CUmemGenericAllocationHandle handle,
                                                              CUmemAllocationHandleType handleType,
                                                              unsigned long long flags) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!shareableHandle || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    int fd = -1;
    if (CUresult r = d.vmm_export(handle, handleType, fd); r != CUDA_SUCCESS) return r;
    *static_cast<int*>(shareableHandle) = fd;
    return CUDA_SUCCESS;
  });
}

// [CH] for a POSIX file descriptor, osHandle is the descriptor itself, cast to a pointer.
TESSERA_CUDA_SIM_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                                                CUmemAllocationHandleType shHandleType) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    const auto fd = reinterpret_cast<std::intptr_t>(osHandle);
    if (fd < 0 || fd > INT32_MAX) return CUDA_ERROR_INVALID_VALUE;
    return d.vmm_import(static_cast<int>(fd), *handle);
  });
}
