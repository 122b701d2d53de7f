// The simulated driver's entry points. Checks run in the order: initialised,
// arguments, current context, then the operation. Each return code names its
// source: [CH] (the CUDA Driver API reference in cuda.h, cited by
// docs/design-memory-quotas.md) or "sim" for a choice of this simulator.
#include <algorithm>
#include <climits>
#include <cstring>

#include "entry.hpp"

using namespace tessera_cuda_sim;

namespace {

// The 32-bit ABIs cannot carry a modern device's sizes: sim saturates them.
unsigned int saturate32(std::uint64_t v) { return v > UINT_MAX ? UINT_MAX : static_cast<unsigned int>(v); }

CUresult ctx_create(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return initialized([&](Driver& d) {
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;               // [CH]
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_DEVICE;  // [CH]
    (void)flags;                                              // sim: scheduling flags change nothing here
    Context* c = nullptr;
    if (CUresult r = d.create_context(dev, c); r != CUDA_SUCCESS) return r;  // its own memory did not fit
    d.thread_stack().push_back(c);  // [CH] cuCtxCreate: the new context is current to the calling thread
    *pctx = reinterpret_cast<CUcontext>(c);
    return CUDA_SUCCESS;
  });
}

CUresult ctx_destroy(CUcontext ctx) {
  return initialized([&](Driver& d) {
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    auto* c = reinterpret_cast<Context*>(ctx);
    if (!d.is_live(c) || c->primary) return CUDA_ERROR_INVALID_CONTEXT;  // sim: primary ones go by release
    // [CH] cuCtxDestroy: a context current to the calling thread is popped.
    auto& s = d.thread_stack();
    if (!s.empty() && s.back() == c) s.pop_back();
    return d.destroy_context(c);
  });
}

CUresult primary_release(CUdevice dev) {
  return initialized([&](Driver& d) {
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (d.primary_refs(dev) == 0) return CUDA_ERROR_INVALID_CONTEXT;  // sim: nothing retained
    // [CH] the last release resets the primary context, freeing its memory (design §1).
    if (--d.primary_refs(dev) == 0) return d.destroy_context(d.primary(dev));
    return CUDA_SUCCESS;
  });
}

// [CH] cuDevicePrimaryCtxReset "destroys all allocations and resets all state
// on the primary context" but "does not release it": the context-bound memory
// is freed and the context becomes inactive, the retain count stays, and a
// later release is still fine. sim: resetting an inactive primary context is
// CUDA_SUCCESS and changes nothing.
CUresult primary_reset(CUdevice dev) {
  return initialized([&](Driver& d) {
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_DEVICE;
    Context* c = d.primary(dev);
    if (!d.is_live(c)) return CUDA_SUCCESS;
    return d.destroy_context(c);
  });
}

CUresult device_uuid(CUuuid* uuid, CUdevice dev) {
  return initialized([&](Driver& d) {
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_DEVICE;
    std::memcpy(uuid->bytes, d.devices[static_cast<std::size_t>(dev)].uuid, 16);
    return CUDA_SUCCESS;
  });
}

// [CH] cuDeviceTotalMem: NOT_INITIALIZED, then INVALID_VALUE for a NULL
// output, INVALID_DEVICE for a bad ordinal.
CUresult total_mem(bool null_output, std::uint64_t& bytes, CUdevice dev) {
  return initialized([&](Driver& d) {
    if (null_output) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_DEVICE;
    bytes = d.devices[static_cast<std::size_t>(dev)].bytes;
    return CUDA_SUCCESS;
  });
}

// free and total of the current context's device: total is the device's
// memory, free what no process sharing the device's usage holds (sim: a
// context itself costs nothing). [CH] needs a current context; a NULL output
// is left alone (design §3: OptiX passes free = NULL).
CUresult mem_info(std::uint64_t* free_bytes, std::uint64_t* total_bytes) {
  return initialized([&](Driver& d) {
    Context* c = d.current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    Usage u;
    if (CUresult r = d.usage(c->device, u); r != CUDA_SUCCESS) return r;
    const std::uint64_t total = d.devices[static_cast<std::size_t>(c->device)].bytes;
    if (free_bytes) *free_bytes = u.device >= total ? 0 : total - u.device;
    if (total_bytes) *total_bytes = total;
    return CUDA_SUCCESS;
  });
}

CUresult mem_alloc(CUdeviceptr* dptr, std::uint64_t bytes, bool low) {
  return initialized([&](Driver& d) {
    if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;  // [CH] cuMemAlloc: bytesize 0 is INVALID_VALUE
    Context* c = d.current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;  // [CH]
    return d.allocate(c, bytes, low, *dptr);    // OUT_OF_MEMORY past the device's memory [CH]
  });
}

// Pitch rule (sim): the pitch is WidthInBytes rounded up to 512 bytes and the
// allocation charges pitch × Height. A real device's alignment is its own; the
// device check measures it. [CH]: ElementSizeBytes may be 4, 8 or 16.
CUresult mem_alloc_pitch(CUdeviceptr* dptr, std::uint64_t* pitch, std::uint64_t width, std::uint64_t height,
                         unsigned int element, bool low) {
  return initialized([&](Driver& d) {
    if (!dptr || !pitch || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
    if (element != 4 && element != 8 && element != 16) return CUDA_ERROR_INVALID_VALUE;
    Context* c = d.current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    const std::uint64_t p = (width + 511) / 512 * 512;
    if (p < width || height > UINT64_MAX / p) return CUDA_ERROR_OUT_OF_MEMORY;
    if (low && (p > UINT_MAX || p * height > UINT_MAX)) return CUDA_ERROR_OUT_OF_MEMORY;
    if (CUresult r = d.allocate(c, p * height, low, *dptr); r != CUDA_SUCCESS) return r;
    *pitch = p;
    return CUDA_SUCCESS;
  });
}

// [CH] cuMemAllocManaged: bytesize 0 and flags other than CU_MEM_ATTACH_GLOBAL
// or CU_MEM_ATTACH_HOST are CUDA_ERROR_INVALID_VALUE. sim: managed memory is
// charged in full to the current context's device (design §1: charge
// `bytesize`), and is freed with its context like cuMemAlloc's (design §1,
// "Facts behind the rules").
CUresult mem_alloc_managed(CUdeviceptr* dptr, std::uint64_t bytes, unsigned int flags) {
  return initialized([&](Driver& d) {
    if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
    Context* c = d.current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    return d.allocate(c, bytes, /*low=*/false, *dptr);
  });
}

CUresult mem_free(CUdeviceptr p) {
  return initialized([&](Driver& d) {
    if (!d.current()) return CUDA_ERROR_INVALID_CONTEXT;  // [CH] lists INVALID_CONTEXT
    return d.free(p);                                     // INVALID_VALUE for an address it did not return
  });
}

}  // namespace

TESSERA_CUDA_SIM_EXPORT CUresult cuInit(unsigned int flags) {
  TESSERA_CUDA_SIM_COUNT();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;  // [CH] cuInit: Flags must be 0
  auto& d = driver();
  std::lock_guard lock(d.mu);
  return d.init();
}

// [CH]: answers before cuInit too.
TESSERA_CUDA_SIM_EXPORT CUresult cuDriverGetVersion(int* driverVersion) {
  TESSERA_CUDA_SIM_COUNT();
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = kSimDriverVersion;
  return CUDA_SUCCESS;
}

TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceGetCount(int* count) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = static_cast<int>(d.devices.size());
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d, ordinal)) return CUDA_ERROR_INVALID_DEVICE;  // [CH]
    *device = ordinal;
    return CUDA_SUCCESS;
  });
}

// [CH] the device's name, NUL-terminated, at most len bytes with the NUL:
// its model's NVIDIA name (gpu_models.cpp), truncated to len - 1 characters.
TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_DEVICE;
    const char* text = d.devices[static_cast<std::size_t>(dev)].model->name;
    std::size_t n = std::min(std::strlen(text), static_cast<std::size_t>(len) - 1);
    std::memcpy(name, text, n);
    name[n] = '\0';
    return CUDA_SUCCESS;
  });
}

// Two distinct functions; the simulator has no MIG mode, so both give the configured UUID.
TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return device_uuid(uuid, dev);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return device_uuid(uuid, dev);
}

// The 2000 ABI: 32 bits of bytes (sim: saturated at UINT_MAX, as every 2000
// ABI here, for a device of 4 GiB or more).
TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  std::uint64_t v = 0;
  CUresult r = total_mem(!bytes, v, dev);
  if (r == CUDA_SUCCESS) *bytes = saturate32(v);
  return r;
}

TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  std::uint64_t v = 0;
  CUresult r = total_mem(!bytes, v, dev);
  if (r == CUDA_SUCCESS) *bytes = v;
  return r;
}

// The 2000 ABI: the same arguments as _v2 (CUdevice_v1 is int), a distinct function.
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return ctx_create(pctx, flags, dev);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return ctx_create(pctx, flags, dev);
}

// sim: execution-affinity parameters are not modelled; none may be given.
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams,
                                                unsigned int flags, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  if (paramsArray || numParams != 0) return CUDA_ERROR_NOT_SUPPORTED;
  return ctx_create(pctx, flags, dev);
}

// sim: creation parameters (affinity, CIG) are not modelled; NULL only.
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams,
                                                unsigned int flags, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  if (ctxCreateParams) return CUDA_ERROR_NOT_SUPPORTED;
  return ctx_create(pctx, flags, dev);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  TESSERA_CUDA_SIM_COUNT();
  return ctx_destroy(ctx);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  TESSERA_CUDA_SIM_COUNT();
  return ctx_destroy(ctx);
}

// [CH] replaces the top of the thread's context stack, or pushes onto an
// empty one; NULL pops (a no-op on an empty stack).
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    auto* c = reinterpret_cast<Context*>(ctx);
    auto& s = d.thread_stack();
    if (!c) {
      if (!s.empty()) s.pop_back();
      return CUDA_SUCCESS;
    }
    if (!d.is_live(c)) return CUDA_ERROR_INVALID_CONTEXT;
    if (s.empty()) s.push_back(c);
    else s.back() = c;
    return CUDA_SUCCESS;
  });
}

// [CH] no current context: CUDA_SUCCESS with *pctx = NULL.
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = reinterpret_cast<CUcontext>(d.current());
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    Context* c = d.current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;  // [CH]
    *device = c->device;
    return CUDA_SUCCESS;
  });
}

// [CH] cuCtxGetDevice_v2 (13000): the device of `ctx`, or of the current
// context for NULL; INVALID_CONTEXT without one or for a destroyed one.
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    auto* c = ctx ? reinterpret_cast<Context*>(ctx) : d.current();
    if (!c || !d.is_live(c)) return CUDA_ERROR_INVALID_CONTEXT;
    *device = c->device;
    return CUDA_SUCCESS;
  });
}

// [CH] retains (activating on first retain) without making it current; the
// handle is the same for every retain.
TESSERA_CUDA_SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_DEVICE;
    Context* c = d.primary(dev);
    // sim: a retain also reactivates a primary context that cuDevicePrimaryCtxReset
    // left inactive while still retained.
    if (!d.is_live(c))
      if (CUresult r = d.activate(c); r != CUDA_SUCCESS) return r;  // its own memory did not fit
    d.primary_refs(dev)++;
    *pctx = reinterpret_cast<CUcontext>(c);
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return primary_release(dev);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return primary_release(dev);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return primary_reset(dev);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  TESSERA_CUDA_SIM_COUNT();
  return primary_reset(dev);
}

// [CH] flags of the primary context and whether it is active (1) or not (0).
// sim: primary context flags are not modelled and read 0.
TESSERA_CUDA_SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(d, dev)) return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = d.is_live(d.primary(dev)) ? 1 : 0;
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  TESSERA_CUDA_SIM_COUNT();
  std::uint64_t f = 0, t = 0;
  CUresult r = mem_info(free ? &f : nullptr, total ? &t : nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (free) *free = saturate32(f);
  if (total) *total = saturate32(t);
  return CUDA_SUCCESS;
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemGetInfo_v2(std::size_t* free, std::size_t* total) {
  TESSERA_CUDA_SIM_COUNT();
  std::uint64_t f = 0, t = 0;
  CUresult r = mem_info(free ? &f : nullptr, total ? &t : nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (free) *free = f;
  if (total) *total = t;
  return CUDA_SUCCESS;
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemAlloc(unsigned int* dptr, unsigned int bytesize) {
  TESSERA_CUDA_SIM_COUNT();
  CUdeviceptr p = 0;
  CUresult r = mem_alloc(dptr ? &p : nullptr, bytesize, /*low=*/true);
  if (r == CUDA_SUCCESS) *dptr = static_cast<unsigned int>(p);
  return r;
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, std::size_t bytesize) {
  TESSERA_CUDA_SIM_COUNT();
  return mem_alloc(dptr, bytesize, /*low=*/false);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemFree(unsigned int dptr) {
  TESSERA_CUDA_SIM_COUNT();
  return mem_free(dptr);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  TESSERA_CUDA_SIM_COUNT();
  return mem_free(dptr);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemAllocPitch(unsigned int* dptr, unsigned int* pPitch, unsigned int WidthInBytes,
                                                 unsigned int Height, unsigned int ElementSizeBytes) {
  TESSERA_CUDA_SIM_COUNT();
  CUdeviceptr p = 0;
  std::uint64_t pitch = 0;
  CUresult r = mem_alloc_pitch(dptr ? &p : nullptr, pPitch ? &pitch : nullptr, WidthInBytes, Height,
                               ElementSizeBytes, /*low=*/true);
  if (r == CUDA_SUCCESS) {
    *dptr = static_cast<unsigned int>(p);
    *pPitch = static_cast<unsigned int>(pitch);
  }
  return r;
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, std::size_t* pPitch, std::size_t WidthInBytes,
                                                    std::size_t Height, unsigned int ElementSizeBytes) {
  TESSERA_CUDA_SIM_COUNT();
  std::uint64_t pitch = 0;
  CUresult r = mem_alloc_pitch(dptr, pPitch ? &pitch : nullptr, WidthInBytes, Height, ElementSizeBytes,
                               /*low=*/false);
  if (r == CUDA_SUCCESS) *pPitch = pitch;
  return r;
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, std::size_t bytesize, unsigned int flags) {
  TESSERA_CUDA_SIM_COUNT();
  return mem_alloc_managed(dptr, bytesize, flags);
}

TESSERA_CUDA_SIM_EXPORT CUresult tesseraCudaSimUsage(int ordinal, unsigned long long* process_bytes,
                                                     unsigned long long* device_bytes,
                                                     unsigned long long* device_peak) {
  return initialized([&](Driver& d) {
    if (!valid_device(d, ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    Usage u;
    if (CUresult r = d.usage(ordinal, u); r != CUDA_SUCCESS) return r;
    if (process_bytes) *process_bytes = u.process;
    if (device_bytes) *device_bytes = u.device;
    if (device_peak) *device_peak = u.peak;
    return CUDA_SUCCESS;
  });
}
