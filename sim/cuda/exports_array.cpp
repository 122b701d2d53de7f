// CUDA arrays and mipmapped arrays ([CH] cuArrayCreate, cuArray3DCreate,
// cuMipmappedArrayCreate; design §1). A real array's footprint is opaque, so
// the simulator documents its own (design §1's estimate):
//   Width × max(Height,1) × max(Depth,1) × NumChannels × bytes of Format,
//   rounded up to 2 MiB; 0 with CUDA_ARRAY3D_SPARSE or _DEFERRED_MAPPING
//   (no backing memory until mapped);
// a mipmapped array is the sum of its levels' sizes so computed, level i+1
// halving each non-zero extent of level i (minimum 1), except Depth of a
// layered or cubemap array, which counts layers or faces and stays.
// Arrays belong to the current context and die with it (design §1).
#include <algorithm>
#include <climits>

#include "entry.hpp"

using namespace tessera_cuda_sim;

namespace {

struct Extent {
  std::uint64_t width, height, depth;
  CUarray_format format;
  unsigned int channels, flags;
};

// sim: only the eight plain formats are modelled; any other is NOT_SUPPORTED.
std::uint64_t format_bytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
  }
}

// [CH]: NumChannels is 1, 2 or 4; a 1D array has Height and Depth 0, a
// Height of 0 with a Depth needs CUDA_ARRAY3D_LAYERED; a cubemap has Width
// equal to Height and Depth 6 (a multiple of 6 when also layered).
CUresult check(const Extent& e) {
  if (e.width == 0) return CUDA_ERROR_INVALID_VALUE;
  if (e.channels != 1 && e.channels != 2 && e.channels != 4) return CUDA_ERROR_INVALID_VALUE;
  if (e.height == 0 && e.depth != 0 && !(e.flags & CUDA_ARRAY3D_LAYERED)) return CUDA_ERROR_INVALID_VALUE;
  if (e.flags & CUDA_ARRAY3D_CUBEMAP) {
    const bool faces = (e.flags & CUDA_ARRAY3D_LAYERED) ? (e.depth != 0 && e.depth % 6 == 0) : e.depth == 6;
    if (e.width != e.height || !faces) return CUDA_ERROR_INVALID_VALUE;
  }
  if (format_bytes(e.format) == 0) return CUDA_ERROR_NOT_SUPPORTED;
  return CUDA_SUCCESS;
}

// The size rule above for one level; false on overflow.
bool level_bytes(const Extent& e, std::uint64_t& out) {
  if (e.flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)) {
    out = 0;
    return true;
  }
  std::uint64_t v = e.width;
  for (std::uint64_t f : {std::max<std::uint64_t>(e.height, 1), std::max<std::uint64_t>(e.depth, 1),
                          static_cast<std::uint64_t>(e.channels), format_bytes(e.format)}) {
    if (v > UINT64_MAX / f) return false;
    v *= f;
  }
  if (v > UINT64_MAX - (kGranule - 1)) return false;
  out = (v + kGranule - 1) / kGranule * kGranule;
  return true;
}

CUresult create(CUarray* handle, const Extent& e) {
  return initialized([&](Driver& d) {
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check(e); r != CUDA_SUCCESS) return r;
    Context* c = d.current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    std::uint64_t bytes = 0;
    if (!level_bytes(e, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    std::uintptr_t h = 0;
    if (CUresult r = d.array_create(c, bytes, /*mipmapped=*/false, h); r != CUDA_SUCCESS) return r;
    *handle = reinterpret_cast<CUarray>(h);
    return CUDA_SUCCESS;
  });
}

Extent extent(const CUDA_ARRAY3D_DESCRIPTOR& a) {
  return Extent{a.Width, a.Height, a.Depth, a.Format, a.NumChannels, a.Flags};
}

}  // namespace

// The 2000 ABI: the same rules on a descriptor with unsigned int sizes.
TESSERA_CUDA_SIM_EXPORT CUresult cuArrayCreate(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* pAllocateArray) {
  TESSERA_CUDA_SIM_COUNT();
  if (!pAllocateArray) return create(nullptr, Extent{});
  const auto& a = *pAllocateArray;
  return create(pHandle, Extent{a.Width, a.Height, 0, a.Format, a.NumChannels, 0});
}

TESSERA_CUDA_SIM_EXPORT CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  TESSERA_CUDA_SIM_COUNT();
  if (!pAllocateArray) return create(nullptr, Extent{});
  const auto& a = *pAllocateArray;
  return create(pHandle, Extent{a.Width, a.Height, 0, a.Format, a.NumChannels, 0});
}

TESSERA_CUDA_SIM_EXPORT CUresult cuArray3DCreate(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* pAllocateArray) {
  TESSERA_CUDA_SIM_COUNT();
  if (!pAllocateArray) return create(nullptr, Extent{});
  const auto& a = *pAllocateArray;
  return create(pHandle, Extent{a.Width, a.Height, a.Depth, a.Format, a.NumChannels, a.Flags});
}

TESSERA_CUDA_SIM_EXPORT CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
  TESSERA_CUDA_SIM_COUNT();
  if (!pAllocateArray) return create(nullptr, Extent{});
  return create(pHandle, extent(*pAllocateArray));
}

// [CH] CUDA_ERROR_INVALID_HANDLE for what is not an array;
// CONTEXT_IS_DESTROYED for one its context took with it.
TESSERA_CUDA_SIM_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized(
      [&](Driver& d) { return d.array_destroy(reinterpret_cast<std::uintptr_t>(hArray), /*mipmapped=*/false); });
}

// [CH] numMipmapLevels is clamped to [1, 1 + floor(log2(max(Width, Height, Depth)))].
TESSERA_CUDA_SIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle,
                                                        const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                                        unsigned int numMipmapLevels) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!pHandle || !pMipmappedArrayDesc) return CUDA_ERROR_INVALID_VALUE;
    Extent e = extent(*pMipmappedArrayDesc);
    if (CUresult r = check(e); r != CUDA_SUCCESS) return r;
    Context* c = d.current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    std::uint64_t largest = std::max({e.width, e.height, e.depth});
    unsigned int most = 1;
    while (largest >>= 1) ++most;
    const unsigned int levels = std::clamp(numMipmapLevels, 1u, most);
    const bool layers = e.flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
    std::uint64_t total = 0;
    for (unsigned int i = 0; i < levels; ++i) {
      std::uint64_t bytes = 0;
      if (!level_bytes(e, bytes) || bytes > UINT64_MAX - total) return CUDA_ERROR_OUT_OF_MEMORY;
      total += bytes;
      auto half = [](std::uint64_t v) { return v == 0 ? 0 : std::max<std::uint64_t>(v / 2, 1); };
      e.width = half(e.width);
      e.height = half(e.height);
      if (!layers) e.depth = half(e.depth);
    }
    std::uintptr_t h = 0;
    if (CUresult r = d.array_create(c, total, /*mipmapped=*/true, h); r != CUDA_SUCCESS) return r;
    *pHandle = reinterpret_cast<CUmipmappedArray>(h);
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    return d.array_destroy(reinterpret_cast<std::uintptr_t>(hMipmappedArray), /*mipmapped=*/true);
  });
}
