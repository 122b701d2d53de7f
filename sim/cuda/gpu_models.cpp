// The simulated GPU models and their cuDeviceGetAttribute answers. Sources,
// cited by tag on each figure:
//   [PG]  CUDA C++ Programming Guide, "Compute Capabilities" appendix, table
//         "Technical Specifications per Compute Capability" (columns 8.0,
//         9.0, 10.0): per-architecture limits.
//   [DS]  NVIDIA product datasheets / whitepapers (A100: Ampere architecture
//         whitepaper and A100 datasheet; A30 datasheet; H100: Hopper
//         architecture whitepaper and H100 datasheet; H200 datasheet; DGX/HGX
//         B200 datasheet): SM counts, boost clocks, bandwidth, L2.
//   [DQ]  NVIDIA's deviceQuery sample (cuda-samples) as published from real
//         boards (A100-SXM4-80GB and H100 80GB HBM3 under drivers 12.2-13.0):
//         the figures the driver itself reports.
//   [XLA] openxla/xla xla/backends/gpu/target_config/specs/*.txtpb: device
//         descriptions read from real boards through the driver (model_str:
//         clock, memory clock, L2); bus width = memory_bandwidth * 8 /
//         (2 * memory clock), the formula those files use.
//   [PCI] the PCI device ids of tessera's catalog (nvidia-mig-parted's table).
//   sim   a choice of this simulator, where no published figure exists or the
//         feature is not simulated (a capability the simulator does not
//         implement reads 0, so no client tries it).
#include "gpu_models.hpp"

#include <climits>
#include <cstddef>
#include <iterator>

namespace tessera_cuda_sim {

namespace {

// clang-format off
const GpuModel kModels[] = {
    // A100-SXM4-40GB: 108 SMs, 1410 MHz, 40 MiB L2 [DS]; 1215 MHz memory clock [XLA a100_sxm_40]; 5120-bit
    // (1555.2 GB/s [XLA] = 2 x 1215 MHz x 5120 / 8); 3 copy engines (sim: as the A100 80GB [DQ]).
    {"A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", 8, 0, 108, 1410000, 1215000, 5120, 41943040, 3, 0x20B010DE},
    // A100-SXM4-80GB: [DQ] 108 SMs, 1410 MHz, memory 1593 MHz, 5120-bit, L2 41943040 bytes, 3 copy engines.
    {"A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410000, 1593000, 5120, 41943040, 3, 0x20B210DE},
    // A30: [DS] 56 SMs, 1440 MHz boost, 24 MB L2, 933 GB/s = 2 x 1215 MHz x 3072 / 8 (nvbench device listing of
    // an A30 prints "3072-bit DDR @1215MHz", "L2 Cache Size: 24576 KiB"); copy engines: sim, as the A100.
    {"A30-24GB", "NVIDIA A30", 8, 0, 56, 1440000, 1215000, 3072, 25165824, 3, 0x20B710DE},
    // H100-SXM5-80GB: [DQ] 132 SMs, 1980 MHz, memory 2619 MHz, 5120-bit, L2 52428800 bytes, 3 copy engines.
    {"H100-SXM5-80GB", "NVIDIA H100 80GB HBM3", 9, 0, 132, 1980000, 2619000, 5120, 52428800, 3, 0x233010DE},
    // H100-PCIe-80GB: [XLA h100_pcie] 114 SMs, 1755 MHz, 50 MiB L2, 2039.04 GB/s = 2 x 1593 MHz x 5120 / 8
    // ([DS]: 2 TB/s HBM2e); copy engines: sim, as the SXM5 board.
    {"H100-PCIe-80GB", "NVIDIA H100 PCIe", 9, 0, 114, 1755000, 1593000, 5120, 52428800, 3, 0x233110DE},
    // H200-SXM-141GB: the H100's GH100 (132 SMs, 1980 MHz, 50 MiB L2 [DS]) with six HBM3e stacks (6144-bit);
    // memory clock derived from the datasheet's 4.8 TB/s: 4.8e12 * 8 / (2 * 6144) = 3125 MHz (not yet read
    // from a board: the device check should); copy engines: sim, as the H100.
    {"H200-SXM-141GB", "NVIDIA H200", 9, 0, 132, 1980000, 3125000, 6144, 52428800, 3, 0x233510DE},
    // B200-180GB: [XLA b200] 148 SMs, 1965000 kHz clock, 3996000 kHz memory clock, L2 132644864 bytes,
    // 7680-bit (7672.32 GB/s = 2 x 3996 MHz x 7680 / 8); copy engines: sim, as the H100.
    {"B200-180GB", "NVIDIA B200", 10, 0, 148, 1965000, 3996000, 7680, 132644864, 3, 0x290110DE},
};
// clang-format on

// The simulator's default device (unset TESSERA_SIM_CUDA_DEVICES, or an
// entry without a model): sim's choice, the board tessera is mostly run on.
constexpr std::size_t kDefault = 3;  // H100-SXM5-80GB

// PCI buses of the GPUs of an 8-GPU HGX board in ordinal order (sim: the
// buses sim/nvml gives its GPUs, as nvidia-smi lists a DGX A100); more GPUs
// continue from 0xC0.
constexpr int kBuses[] = {0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD};

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool same(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// Per-architecture figures [PG]: shared memory per SM and the opt-in maximum
// per block (8.0: 164 KB and 163 KB; 9.0 and 10.0: 228 KB and 227 KB).
int shared_per_sm(const GpuModel& m) { return m.cc_major >= 9 ? 228 * 1024 : 164 * 1024; }
int shared_optin(const GpuModel& m) { return m.cc_major >= 9 ? 227 * 1024 : 163 * 1024; }

}  // namespace

std::span<const GpuModel> gpu_models() { return kModels; }

const GpuModel& default_gpu_model() { return kModels[kDefault]; }

const GpuModel* find_gpu_model(std::string_view text) {
  std::string_view bare = text;
  if (bare.size() > 7 && same(bare.substr(0, 7), "NVIDIA ")) bare.remove_prefix(7);
  for (const auto& m : kModels) {
    std::string_view name = m.name;
    name.remove_prefix(7);  // every name starts "NVIDIA "
    if (same(text, m.key) || same(text, m.name) || same(bare, name)) return &m;
  }
  return nullptr;
}

bool device_attribute(const GpuModel& m, int ordinal, int attribute, int& v) {
  const bool hopper_on = m.cc_major >= 9;
  switch (attribute) {
    // Per-architecture limits, equal for 8.0, 9.0 and 10.0 [PG].
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; return true;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; return true;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; return true;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = INT_MAX; return true;  // 2^31 - 1
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; return true;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 48 * 1024; return true;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 64 * 1024; return true;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; return true;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: v = 64 * 1024; return true;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; return true;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: v = 32; return true;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: v = shared_per_sm(m); return true;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = shared_optin(m); return true;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: v = 1024; return true;  // [PG]: 1 KB per block
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = m.cc_major; return true;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = m.cc_minor; return true;
    // [PG]: thread block clusters and the tensor memory accelerator from 9.0 on;
    // Hopper has 4 memory synchronization domains, earlier GPUs report 1.
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED: v = hopper_on ? 1 : 0; return true;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: v = hopper_on ? 4 : 1; return true;

    // Per model (the table above).
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = m.sm_count; return true;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = m.clock_khz; return true;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = m.memory_clock_khz; return true;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = m.bus_width_bits; return true;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = m.l2_bytes; return true;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = m.copy_engines; return true;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID: v = m.pci_id; return true;
    // [DS]: FP32 is twice FP64 on A100 (19.5/9.7 TFLOPS), A30 (10.3/5.2), H100/H200 (67/34), B200 (80/40).
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: v = 2; return true;

    // Where the device sits (sim: domain 0, device 0, the buses above).
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = 0; return true;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      v = ordinal < static_cast<int>(std::size(kBuses)) ? kBuses[ordinal] : 0xC0 + ordinal;
      return true;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: v = 0; return true;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: v = ordinal; return true;  // sim: one board each
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG: v = 0; return true;  // [CH] CU_DEVICE_NUMA_CONFIG_NONE
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: v = -1; return true;  // [CH]: -1 without NUMA

    // What [DQ] prints for these boards on Linux: a discrete data-centre GPU,
    // ECC on, default compute mode, no kernel time limit, not TCC (a Windows
    // driver model), unified addressing, managed memory, mapped host memory,
    // preemption, cooperative launch.
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: v = 0; return true;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = CU_COMPUTEMODE_DEFAULT; return true;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:  // [PG]: Linux, compute capability 6.x and later
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER: v = 1; return true;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: v = INT_MAX; return true;  // [DQ] 2147483647 bytes
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: v = 512; return true;  // [DQ] texture alignment 512 bytes
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: v = 32; return true;  // sim: cudaDeviceProp's 32 bytes

    // Texture and surface limits [PG] (the same from 5.0 to 10.0; [DQ] prints
    // the 1D, 2D, 3D and layered ones).
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH: v = 131072; return true;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT: v = 65536; return true;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT: v = 65000; return true;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH: v = 16384; return true;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH: v = 32768; return true;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS: v = 2048; return true;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS: v = 2046; return true;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH: v = 1 << 28; return true;
    // sim: not in [PG]'s table; what cudaDeviceProp reports on these GPUs.
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE: v = 8192; return true;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE: v = 32768; return true;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH: v = 2097120; return true;

    // Memory families the simulator implements (design §5): VMM with POSIX
    // handles and host locations, pools on devices only, sparse and deferred
    // arrays.
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: v = 1; return true;

    // sim: not simulated (or a Windows or integrated-GPU feature), so 0.
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING:
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS:
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED:
    case CU_DEVICE_ATTRIBUTE_D3D12_CIG_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK:
    case CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_MAXIMUM_LENGTH:
    case CU_DEVICE_ATTRIBUTE_VULKAN_CIG_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED: v = 0; return true;

    default: return false;  // 0, CU_DEVICE_ATTRIBUTE_MAX and beyond: not an attribute of CUDA 13.0
  }
}

}  // namespace tessera_cuda_sim
