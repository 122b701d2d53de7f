// How wrappers reach the program (docs/design-memory-quotas.md §1,
// "Interposition rules"): an exported dlsym, both cuGetProcAddress variants,
// and the row table that says which variant answers which request.
#include <dlfcn.h>

#include <cstring>

#include "cuda_quota/entry_points.hpp"
#include "cuda_quota/quota.hpp"

namespace tessera::quota {

const Row kRows[] = {
#define TESSERA_QUOTA_ROW(name, base, version, ptsz) {#name, base, version, ptsz, reinterpret_cast<void*>(&::name)},
    TESSERA_QUOTA_ENTRY_POINTS(TESSERA_QUOTA_ROW)
#undef TESSERA_QUOTA_ROW
};

namespace {

std::atomic<void*> g_real[static_cast<int>(Fn::count)];

bool is_nvml(Fn f) { return kRows[static_cast<int>(f)].version == 0; }

// Records the driver's pointer for a row, or confirms it. False when another
// pointer was recorded first: the wrapper would forward elsewhere than this
// caller asked, so the caller keeps the driver's pointer.
bool adopt(Fn f, void* driver) {
  void* expected = nullptr;
  auto& slot = g_real[static_cast<int>(f)];
  if (slot.compare_exchange_strong(expected, driver, std::memory_order_acq_rel)) return true;
  if (expected == driver) return true;
  log(Level::debug, "%s: the driver answered %p, earlier %p; left unwrapped", kRows[static_cast<int>(f)].exported,
      driver, expected);
  return false;
}

Fn by_exported_name(const char* name) {
  if (!name || (strncmp(name, "cu", 2) != 0 && strncmp(name, "nvml", 4) != 0)) return Fn::count;
  for (int i = 0; i < static_cast<int>(Fn::count); ++i)
    if (!strcmp(kRows[i].exported, name)) return static_cast<Fn>(i);
  return Fn::count;
}

// Whether `p` lies in the CUDA driver or NVML (by file name: libcuda.so.1,
// libnvidia-ml.so.1, whatever directory they were loaded from).
bool in_driver(void* p, bool nvml) {
  Dl_info info{};
  if (!dladdr(p, &info) || !info.dli_fname) return false;
  const char* base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  return nvml ? !strncmp(base, "libnvidia-ml.so", 15) : !strncmp(base, "libcuda.so", 10);
}

using DlsymFn = void* (*)(void*, const char*);

}  // namespace
}  // namespace tessera::quota

// glibc's dlsym, read by dlsym_entry.S without a lock: a pointer-sized store
// of the same value by any thread that resolves it.
extern "C" {
__attribute__((visibility("hidden"))) tessera::quota::DlsymFn tessera_glibc_dlsym = nullptr;
}

extern "C" __attribute__((visibility("hidden"))) void* tessera_resolve_glibc_dlsym() {
  using tessera::quota::DlsymFn;
  auto* slot = reinterpret_cast<std::atomic<DlsymFn>*>(&tessera_glibc_dlsym);
  DlsymFn f = slot->load(std::memory_order_acquire);
  if (!f) {
    // [G] glibc >= 2.34 exports dlsym@@GLIBC_2.34 and dlsym@GLIBC_2.2.5 at one address.
    // dlvsym is not intercepted by sanitizer runtimes, so this is safe during their start-up.
    f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (!f) f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    slot->store(f, std::memory_order_release);
  }
  return reinterpret_cast<void*>(f);
}

namespace tessera::quota {

void* real_dlsym(void* handle, const char* name) {
  auto f = reinterpret_cast<DlsymFn>(tessera_resolve_glibc_dlsym());
  return f ? f(handle, name) : nullptr;
}

void* real(Fn f) {
  auto& slot = g_real[static_cast<int>(f)];
  void* p = slot.load(std::memory_order_acquire);
  if (p) return p;
  const char* name = kRows[static_cast<int>(f)].exported;
  p = is_nvml(f) ? nvml_symbol(name) : driver_symbol(name);
  if (p) adopt(f, p);
  return slot.load(std::memory_order_acquire);
}

Fn select(const char* base, int cuda_version, cuuint64_t flags) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(Fn::count); ++i) {
    const Row& r = kRows[i];
    if (r.version == 0 || r.ptsz || r.version > cuda_version || strcmp(r.base, base) != 0) continue;
    if (best < 0 || r.version > kRows[best].version) best = i;
  }
  if (best < 0) return Fn::count;
  // [CH] PER_THREAD_DEFAULT_STREAM: the _ptsz variant where one exists, else the legacy one.
  if (flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
    for (int i = 0; i < static_cast<int>(Fn::count); ++i)
      if (kRows[i].ptsz && kRows[i].version == kRows[best].version && !strcmp(kRows[i].base, base))
        return static_cast<Fn>(i);
  return static_cast<Fn>(best);
}

namespace {

// Rule 3: the driver answered; swap in our wrapper only for a selected row.
void substitute(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  if (!symbol || !pfn || !*pfn || !enabled()) return;
  const Fn f = select(symbol, cuda_version, flags);
  if (f == Fn::count || !adopt(f, *pfn)) return;
  *pfn = kRows[static_cast<int>(f)].wrapper;
}

}  // namespace
}  // namespace tessera::quota

using namespace tessera::quota;

extern "C" {

// Every dlsym but RTLD_NEXT ones (dlsym_entry.S): the driver's answer, or the
// wrapper of exactly that exported variant.
__attribute__((visibility("hidden"))) void* tessera_dlsym(void* handle, const char* name) {
  void* r = real_dlsym(handle, name);
  if (!r || !enabled()) return r;
  const Fn f = by_exported_name(name);
  if (f == Fn::count || !in_driver(r, is_nvml(f)) || !adopt(f, r)) return r;
  return kRows[static_cast<int>(f)].wrapper;
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                                                 cuuint64_t flags) {
  auto driver = REAL(cuGetProcAddress);
  if (!driver) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult r = driver(symbol, pfn, cudaVersion, flags);
  if (r == CUDA_SUCCESS) substitute(symbol, pfn, cudaVersion, flags);
  return r;
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                                    cuuint64_t flags,
                                                                    CUdriverProcAddressQueryResult* symbolStatus) {
  auto driver = REAL(cuGetProcAddress_v2);
  if (!driver) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult r = driver(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (r == CUDA_SUCCESS) substitute(symbol, pfn, cudaVersion, flags);
  return r;
}

}  // extern "C"
