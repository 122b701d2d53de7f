// The simulator's hardware table. Sources, named by tag in the comments:
//   [MIG-SP]  NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles": one table per GPU
//             (profile names, fraction of memory and SMs, NVDEC/JPEG/OFA, copy engines, instances).
//   [MIG-GS]  NVIDIA MIG User Guide, "Getting Started with MIG": the `nvidia-smi mig -lgip`,
//             `-lgipp` and `-lcip` examples on an A100-SXM4-40GB (R450).
//   [MIG-GPU] NVIDIA MIG User Guide, "Supported GPUs" and "Concepts": 7 compute and 8 memory
//             slices (A30: 4 and 4), up to 7 instances (A30: 4).
//   [NVML-H]  NVIDIA nvml.h (NVML 13.3.29): NVML_GPU_INSTANCE_PROFILE_*,
//             NVML_COMPUTE_INSTANCE_PROFILE_*, NVML_DEVICE_ARCH_*.
//   [PARTED]  NVIDIA mig-parted config-default.yaml (third_party/nvidia-mig-parted): the
//             device-filter PCI ids of each GPU and the boards grouped with it.
//   [CUDA-CC] NVIDIA, "CUDA GPUs" (developer.nvidia.com/cuda-gpus): compute capability.
//   [SMI]     `nvidia-smi mig -lgip` / `-lgipp` outputs of real GPUs, named per model below
//             (memory in MiB is the printed GiB x 1024; every published figure is a multiple of 64).
// A figure none of these gives is derived by a rule stated where it is used and marked
// inexact (memory_exact / sm_exact / nvml_name_exact = false).
#include "hardware.hpp"

#include <algorithm>
#include <cctype>
#include <initializer_list>

namespace tessera::sim::hw {

namespace {

using namespace nvml::abi;

// [NVML-H] NVML_GPU_INSTANCE_PROFILE_* (profile indices).
constexpr uint32_t kGi1 = 0x0, kGi2 = 0x1, kGi3 = 0x2, kGi4 = 0x3, kGi7 = 0x4, kGi1Rev1 = 0x7, kGi2Rev1 = 0x8,
                   kGi1Rev2 = 0x9;
// [NVML-H] NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE .. _7_SLICE; [MIG-GS] -lcip shows the CI
// profile id equal to that index (1c.3g.20gb is ID 0, 2c ID 1, the whole 3g ID 2).
constexpr uint32_t kCi1 = 0x0, kCi2 = 0x1, kCi3 = 0x2, kCi4 = 0x3, kCi7 = 0x4;

std::vector<Placement> at(std::initializer_list<uint32_t> starts, uint32_t size) {
  std::vector<Placement> out;
  for (uint32_t s : starts) out.push_back(Placement{s, size});
  return out;
}

struct Shape {
  uint32_t slices = 0;
  uint32_t memory_slices = 0;
  std::vector<Placement> placements;
};

// [MIG-GS] `nvidia-smi mig -lgipp` on the A100: ID 19 and 20 {0..6}:1, ID 15 {0,2,4,6}:2,
// ID 14 {0,2,4}:2, ID 9 {0,4}:4, ID 5 {0}:4, ID 0 {0}:8; the same output is published for
// H100 SXM5 and H100 NVL ([SMI]), and [MIG-SP] draws the same placement diagram for H100,
// H200 and B200.
Shape eight_slice(uint32_t index) {
  switch (index) {
    case kGi1:
    case kGi1Rev1: return {1, 1, at({0, 1, 2, 3, 4, 5, 6}, 1)};
    case kGi1Rev2: return {1, 2, at({0, 2, 4, 6}, 2)};
    case kGi2: return {2, 2, at({0, 2, 4}, 2)};
    case kGi3: return {3, 4, at({0, 4}, 4)};
    case kGi4: return {4, 4, at({0}, 4)};
    case kGi7: return {7, 8, at({0}, 8)};
    default: return {};
  }
}

// [SMI] A30 (driver 535.183.01) -lgipp: ID 14 and 21 {0,1,2,3}:1, ID 5 and 6 {0,2}:2, ID 0 {0}:4.
Shape four_slice(uint32_t index) {
  switch (index) {
    case kGi1:
    case kGi1Rev1: return {1, 1, at({0, 1, 2, 3}, 1)};
    case kGi2:
    case kGi2Rev1: return {2, 2, at({0, 2}, 2)};
    case kGi4: return {4, 4, at({0}, 4)};
    default: return {};
  }
}

// The compute-instance profiles of a GPU instance with `slices` compute slices. [MIG-GS] -lcip
// of a 3g GI: 1c x3, 2c x1, the whole 3g x1, 14 SMs per compute slice on the A100; [MIG-SP]
// "Concepts" builds a 4g GI's CIs from 1, 2 or all 4 slices. The counts and starts follow
// from the slices (a CI of c slices starts at a multiple of c inside the GPU instance).
// `sm_per_slice` is 0 where NVIDIA publishes no per-CI SM count (Hopper, Blackwell: their
// GPU-instance SMs are not linear in the slices); the CI spanning the whole GPU instance has
// its SMs in every case.
std::vector<CiProfile> compute_profiles(const std::string& gi_name, uint32_t slices, uint32_t gi_sm,
                                        uint32_t sm_per_slice) {
  struct Part {
    uint32_t index, size, count;
    std::vector<uint32_t> starts;
  };
  std::vector<Part> parts;
  switch (slices) {
    case 1: parts = {{kCi1, 1, 1, {0}}}; break;
    case 2: parts = {{kCi1, 1, 2, {0, 1}}, {kCi2, 2, 1, {0}}}; break;
    case 3: parts = {{kCi1, 1, 3, {0, 1, 2}}, {kCi2, 2, 1, {0}}, {kCi3, 3, 1, {0}}}; break;
    case 4: parts = {{kCi1, 1, 4, {0, 1, 2, 3}}, {kCi2, 2, 2, {0, 2}}, {kCi4, 4, 1, {0}}}; break;
    case 7:
      parts = {{kCi1, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
               {kCi2, 2, 3, {0, 2, 4}},
               {kCi3, 3, 2, {0, 4}},
               {kCi4, 4, 1, {0}},
               {kCi7, 7, 1, {0}}};
      break;
    default: break;
  }
  std::vector<CiProfile> out;
  for (const auto& p : parts) {
    bool whole = p.size == slices;
    CiProfile c;
    c.name = whole ? gi_name : std::to_string(p.size) + "c." + gi_name;
    c.nvml_index = p.index;
    c.profile_id = p.index;
    c.slices = p.size;
    c.sm_count = whole ? gi_sm : sm_per_slice * p.size;
    c.max_count = p.count;
    for (uint32_t start : p.starts) c.placements.push_back(Placement{start, p.size});
    out.push_back(std::move(c));
  }
  return out;
}

// One GPU-instance profile as a -lgip line gives it; 0 for a memory or SM figure no source gives.
struct Row {
  const char* name;
  uint32_t nvml_index;
  uint32_t profile_id;
  uint64_t memory_mib;
  uint32_t sm_count;
  Engines engines;  // copy engines, NVDEC, NVENC, JPEG, OFA
  uint32_t max_count;
};

struct Header {
  const char* name;
  const char* nvml_name;
  bool nvml_name_exact;
  uint32_t pci_device_id;
  std::vector<uint32_t> siblings;
  std::vector<std::string> aliases;
  nvmlDeviceArchitecture_t architecture;
  int cc_major, cc_minor;
  uint64_t memory_mib;  // 0: no published total
  bool memory_exact;
  uint32_t sm_count;
  bool sm_exact;
};

constexpr uint64_t round_down_64(uint64_t mib) { return mib / 64 * 64; }

Gpu make(const Header& h, std::initializer_list<Row> rows) {
  bool a30 = h.architecture == NVML_DEVICE_ARCH_AMPERE && std::string_view(h.name).starts_with("A30");
  Gpu g;
  g.name = h.name;
  g.nvml_name = h.nvml_name;
  g.nvml_name_exact = h.nvml_name_exact;
  g.pci_device_id = h.pci_device_id;
  g.sibling_pci_ids = h.siblings;
  g.aliases = h.aliases;
  g.architecture = h.architecture;
  g.cc_major = h.cc_major;
  g.cc_minor = h.cc_minor;
  g.memory_mib = h.memory_mib;
  g.memory_exact = h.memory_exact;
  g.sm_count = h.sm_count;
  g.sm_exact = h.sm_exact;
  // [MIG-GPU] slices and instance limits.
  g.memory_slices = a30 ? 4 : 8;
  g.compute_slices = a30 ? 4 : 7;
  g.max_instances = a30 ? 4 : 7;
  // NVLink links per GPU: third-generation NVLink on the A100 has 12, fourth- and
  // fifth-generation (Hopper, Blackwell) 18 (nvml.h NVML_NVLINK_MAX_LINKS is 18).
  g.nvlinks = h.architecture == NVML_DEVICE_ARCH_AMPERE ? 12 : 18;
  for (const auto& r : rows) {
    Shape s = a30 ? four_slice(r.nvml_index) : eight_slice(r.nvml_index);
    GiProfile p;
    p.name = r.name;
    p.nvml_index = r.nvml_index;
    p.profile_id = r.profile_id;
    p.slices = s.slices;
    p.memory_slices = s.memory_slices;
    p.memory_mib = r.memory_mib;
    p.sm_count = r.sm_count;
    p.engines = r.engines;
    // [SMI] every published -lgip output prints P2P "No" for every profile.
    p.p2p = false;
    p.max_count = r.max_count;
    p.placements = std::move(s.placements);
    g.profiles.push_back(std::move(p));
  }
  // Derived figures. A GPU's unknown total is its whole-GPU profile's memory (the largest figure
  // published for it); a profile's unknown memory is that total times its fraction of the memory
  // slices ([MIG-SP] "Fraction of Memory"), in the 64 MiB steps every -lgip figure comes in; an
  // unknown SM count is the slices times the 1-slice profile's SMs.
  const GiProfile* whole = g.profile_by_index(kGi7);
  if (g.memory_mib == 0 && whole && whole->memory_mib) g.memory_mib = whole->memory_mib;
  const GiProfile* one = g.profile_by_index(kGi1);
  for (auto& p : g.profiles) {
    if (p.memory_mib == 0) {
      p.memory_mib = round_down_64(g.memory_mib * p.memory_slices / g.memory_slices);
      p.memory_exact = false;
    }
    if (p.sm_count == 0) {
      p.sm_count = one ? one->sm_count * p.slices : 0;
      p.sm_exact = false;
    }
  }
  if (g.sm_count == 0 && whole) {
    g.sm_count = whole->sm_count;
    g.sm_exact = false;
  }
  // Ampere: 14 SMs per compute slice in every CI ([MIG-GS] -lcip: 1c 14, 2c 28, 3g 42).
  uint32_t ci_sm_per_slice = h.architecture == NVML_DEVICE_ARCH_AMPERE ? 14 : 0;
  for (auto& p : g.profiles) p.compute_profiles = compute_profiles(p.name, p.slices, p.sm_count, ci_sm_per_slice);
  return g;
}

std::vector<Gpu> build() {
  std::vector<Gpu> all;

  // A100-SXM4-40GB. Name, PCI id: [PARTED] "A100-40GB" device filter 0x20B010DE, grouped with
  // 0x20B1 (A100 PCIe 40GB), 0x20F1 and 0x20F6 (A800 40GB); 40960 MiB, 108 SMs (A100 datasheet);
  // compute capability 8.0 [CUDA-CC].
  all.push_back(make(
      {"A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", true, 0x20B010DE, {0x20B110DE, 0x20F110DE, 0x20F610DE},
       {"A100-40GB", "A100-PCIE-40GB"}, NVML_DEVICE_ARCH_AMPERE, 8, 0, 40960, true, 108, true},
      {
          // [MIG-GS] -lgip (IDs, GiB, SM, CE/DEC/JPEG/OFA); names and instances also [MIG-SP] A100 table.
          {"1g.5gb", kGi1, 19, 4864, 14, {1, 0, 0, 0, 0}, 7},
          {"1g.5gb+me", kGi1Rev1, 20, 4864, 14, {1, 1, 0, 1, 1}, 1},
          {"1g.10gb", kGi1Rev2, 15, 9856, 14, {1, 1, 0, 0, 0}, 4},
          {"2g.10gb", kGi2, 14, 9856, 28, {2, 1, 0, 0, 0}, 3},
          {"3g.20gb", kGi3, 9, 19968, 42, {3, 2, 0, 0, 0}, 2},
          {"4g.20gb", kGi4, 5, 19968, 56, {4, 2, 0, 0, 0}, 1},
          {"7g.40gb", kGi7, 0, 40192, 98, {7, 5, 0, 1, 1}, 1},
      }));

  // A100-SXM4-80GB. [PARTED] 0x20B210DE, grouped with 0x20B5 (A100 PCIe 80GB), 0x20F3 and 0x20F5
  // (A800 80GB); 81920 MiB, 108 SMs (A100 datasheet); compute capability 8.0 [CUDA-CC].
  all.push_back(make(
      {"A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", true, 0x20B210DE, {0x20B510DE, 0x20F310DE, 0x20F510DE},
       {"A100-80GB", "A100-PCIE-80GB", "NVIDIA A100 80GB PCIe", "NVIDIA A800-SXM4-80GB", "NVIDIA A800 80GB PCIe"},
       NVML_DEVICE_ARCH_AMPERE, 8, 0, 81920, true, 108,
       true},
      {
          // [SMI] -lgip of an A100 80GB PCIe, driver 515.86.01; [MIG-SP] A100 table renamed for 80GB.
          {"1g.10gb", kGi1, 19, 9728, 14, {1, 0, 0, 0, 0}, 7},
          {"1g.10gb+me", kGi1Rev1, 20, 9728, 14, {1, 1, 0, 1, 1}, 1},
          // 1g.20gb: [MIG-SP] (R525+) and [PARTED] all-1g.20gb (4 instances); absent from the R515
          // output, so its memory is taken as that of 2g.20gb, which has the same 2 memory slices.
          {"1g.20gb", kGi1Rev2, 15, 0, 14, {1, 1, 0, 0, 0}, 4},
          {"2g.20gb", kGi2, 14, 19968, 28, {2, 1, 0, 0, 0}, 3},
          {"3g.40gb", kGi3, 9, 40192, 42, {3, 2, 0, 0, 0}, 2},
          {"4g.40gb", kGi4, 5, 40192, 56, {4, 2, 0, 0, 0}, 1},
          {"7g.80gb", kGi7, 0, 80896, 98, {7, 5, 0, 1, 1}, 1},
      }));
  {
    auto& a100 = all.back();
    auto* twenty = const_cast<GiProfile*>(a100.profile_by_id(15));
    twenty->memory_mib = a100.profile_by_id(14)->memory_mib;  // still memory_exact = false
  }

  // A30-24GB. [PARTED] 0x20B710DE; 24576 MiB, 56 SMs (A30 datasheet); compute capability 8.0 [CUDA-CC].
  all.push_back(make({"A30-24GB", "NVIDIA A30", true, 0x20B710DE, {}, {"A30"}, NVML_DEVICE_ARCH_AMPERE, 8, 0, 24576,
                      true, 56, true},
                     {
                         // [SMI] -lgip of an A30, driver 535.183.01; [MIG-SP] A30 table (names, instances; it
                         // gives 1g.6gb 0 NVDECs where the driver reports 1: the driver's figure is kept).
                         {"1g.6gb", kGi1, 14, 5952, 14, {1, 1, 0, 0, 0}, 4},
                         {"1g.6gb+me", kGi1Rev1, 21, 5952, 14, {1, 1, 0, 1, 1}, 1},
                         {"2g.12gb", kGi2, 5, 11968, 28, {2, 2, 0, 0, 0}, 2},
                         {"2g.12gb+me", kGi2Rev1, 6, 11968, 28, {2, 2, 0, 1, 1}, 1},
                         {"4g.24gb", kGi4, 0, 24000, 56, {4, 4, 0, 1, 1}, 1},
                     }));

  // H100-SXM5-80GB. [PARTED] 0x233010DE, grouped with 0x2322 (H800 PCIe) and 0x2324 (H800);
  // 81559 MiB and 132 SMs as nvidia-smi reports them; compute capability 9.0 [CUDA-CC].
  all.push_back(make({"H100-SXM5-80GB", "NVIDIA H100 80GB HBM3", true, 0x233010DE, {0x232210DE, 0x232410DE},
                      {"H100-80GB", "H100-SXM"}, NVML_DEVICE_ARCH_HOPPER, 9, 0, 81559, true, 132, true},
                     {
                         // [SMI] -lgip/-lgipp of an H100 80GB HBM3 (R550+); [MIG-SP] H100 80GB table.
                         {"1g.10gb", kGi1, 19, 9984, 16, {1, 1, 0, 1, 0}, 7},
                         {"1g.10gb+me", kGi1Rev1, 20, 9984, 16, {1, 1, 0, 1, 1}, 1},
                         {"1g.20gb", kGi1Rev2, 15, 20096, 26, {1, 1, 0, 1, 0}, 4},
                         {"2g.20gb", kGi2, 14, 20096, 32, {2, 2, 0, 2, 0}, 3},
                         {"3g.40gb", kGi3, 9, 40448, 60, {3, 3, 0, 3, 0}, 2},
                         {"4g.40gb", kGi4, 5, 40448, 64, {4, 4, 0, 4, 0}, 1},
                         {"7g.80gb", kGi7, 0, 81152, 132, {8, 7, 0, 7, 1}, 1},
                     }));

  // H100-PCIe-80GB. [PARTED] 0x233110DE; 81559 MiB, 114 SMs; compute capability 9.0 [CUDA-CC].
  all.push_back(make({"H100-PCIe-80GB", "NVIDIA H100 PCIe", true, 0x233110DE, {}, {"H100-PCIE", "NVIDIA H100 PCIe"},
                      NVML_DEVICE_ARCH_HOPPER, 9, 0, 81559, true, 114, true},
                     {
                         // [SMI] -lgip of an H100 PCIe, driver 570.169: the SXM5's memory and engines,
                         // fewer SMs; [MIG-SP] H100 80GB table ("PCIe and SXM5").
                         {"1g.10gb", kGi1, 19, 9984, 14, {1, 1, 0, 1, 0}, 7},
                         {"1g.10gb+me", kGi1Rev1, 20, 9984, 14, {1, 1, 0, 1, 1}, 1},
                         {"1g.20gb", kGi1Rev2, 15, 20096, 14, {1, 1, 0, 1, 0}, 4},
                         {"2g.20gb", kGi2, 14, 20096, 30, {2, 2, 0, 2, 0}, 3},
                         {"3g.40gb", kGi3, 9, 40448, 46, {3, 3, 0, 3, 0}, 2},
                         {"4g.40gb", kGi4, 5, 40448, 62, {4, 4, 0, 4, 0}, 1},
                         {"7g.80gb", kGi7, 0, 81152, 114, {8, 7, 0, 7, 1}, 1},
                     }));

  // H100-NVL-94GB. [PARTED] 0x232110DE ("H100 NVL"), grouped with 0x233A (H800 NVL); 132 SMs;
  // compute capability 9.0 [CUDA-CC]. No published device total: the 7g profile's memory stands in.
  all.push_back(make({"H100-NVL-94GB", "NVIDIA H100 NVL", true, 0x232110DE, {0x233A10DE}, {"H100-NVL", "H100-94GB"},
                      NVML_DEVICE_ARCH_HOPPER, 9, 0, 0, false, 132, true},
                     {
                         // [SMI] -lgip/-lgipp of an H100 NVL; names, engines: [MIG-SP] H100 94GB table.
                         {"1g.12gb", kGi1, 19, 10880, 16, {1, 1, 0, 1, 0}, 7},
                         {"1g.12gb+me", kGi1Rev1, 20, 10880, 16, {1, 1, 0, 1, 1}, 1},
                         {"1g.24gb", kGi1Rev2, 15, 22016, 26, {1, 1, 0, 1, 0}, 4},
                         {"2g.24gb", kGi2, 14, 22016, 32, {2, 2, 0, 2, 0}, 3},
                         {"3g.47gb", kGi3, 9, 47232, 60, {3, 3, 0, 3, 0}, 2},
                         {"4g.47gb", kGi4, 5, 47232, 64, {4, 4, 0, 4, 0}, 1},
                         {"7g.94gb", kGi7, 0, 94848, 132, {8, 7, 0, 7, 1}, 1},
                     }));

  // H200-SXM-141GB. [PARTED] 0x233510DE ("H200 141GB"), grouped with 0x233B (H200 NVL);
  // 143771 MiB and 132 SMs as nvidia-smi reports them; compute capability 9.0 [CUDA-CC].
  all.push_back(make({"H200-SXM-141GB", "NVIDIA H200", true, 0x233510DE, {0x233B10DE}, {"H200", "H200-141GB", "NVIDIA H200 NVL"},
                      NVML_DEVICE_ARCH_HOPPER, 9, 0, 143771, true, 132, true},
                     {
                         // [SMI] -lgip of an H200 (NVIDIA/mig-parted issue #120); [MIG-SP] H200 141GB table;
                         // memory as driver 580.159.04 reports it through NVML on a real H200 SXM (256 MiB
                         // more than that -lgip for the 2- to 8-slice profiles; docs/device-runs/2026-12-04-h200).
                         {"1g.18gb", kGi1, 19, 16384, 16, {1, 1, 0, 1, 0}, 7},
                         {"1g.18gb+me", kGi1Rev1, 20, 16384, 16, {1, 1, 0, 1, 1}, 1},
                         {"1g.35gb", kGi1Rev2, 15, 33280, 26, {1, 1, 0, 1, 0}, 4},
                         {"2g.35gb", kGi2, 14, 33280, 32, {2, 2, 0, 2, 0}, 3},
                         {"3g.71gb", kGi3, 9, 71424, 60, {3, 3, 0, 3, 0}, 2},
                         {"4g.71gb", kGi4, 5, 71424, 64, {4, 4, 0, 4, 0}, 1},
                         {"7g.141gb", kGi7, 0, 143360, 132, {8, 7, 0, 7, 1}, 1},
                     }));

  // GH200-96GB (the H100 96GB of a GH200). [PARTED] 0x234210DE ("GH200"), grouped with 0x233D
  // (H100 96GB), 0x20B6 (PG506-96GB) and 0x2329 (H20); compute capability 9.0 [CUDA-CC]. No
  // published -lgip output: memory is 96 GiB times each fraction, SMs those of the H100 SXM5's
  // profiles (the same Hopper GPU with 132 SMs), the NVML name is the one nvidia-smi gives the
  // GH200 480GB module.
  all.push_back(make({"GH200-96GB", "NVIDIA GH200 480GB", false, 0x234210DE, {0x233D10DE, 0x20B610DE, 0x232910DE},
                      {"GH200"}, NVML_DEVICE_ARCH_HOPPER, 9, 0, 96 * 1024, false, 132, false},
                     {
                         // [MIG-SP] H100 96GB table ("H100 on GH200"): names, engines, instances.
                         {"1g.12gb", kGi1, 19, 0, 16, {1, 1, 0, 1, 0}, 7},
                         {"1g.12gb+me", kGi1Rev1, 20, 0, 16, {1, 1, 0, 1, 1}, 1},
                         {"1g.24gb", kGi1Rev2, 15, 0, 26, {1, 1, 0, 1, 0}, 4},
                         {"2g.24gb", kGi2, 14, 0, 32, {2, 2, 0, 2, 0}, 3},
                         {"3g.48gb", kGi3, 9, 0, 60, {3, 3, 0, 3, 0}, 2},
                         {"4g.48gb", kGi4, 5, 0, 64, {4, 4, 0, 4, 0}, 1},
                         {"7g.96gb", kGi7, 0, 0, 132, {8, 7, 0, 7, 1}, 1},
                     }));
  for (auto& p : all.back().profiles) p.sm_exact = false;

  // GH200-144GB (HBM3e). [PARTED] 0x234810DE ("GH200 144G HBM3e"); compute capability 9.0
  // [CUDA-CC]. No published device total: 144 GiB stands in; the NVML name follows the board's.
  // Its observed 1g/2g SMs (16/26/32) are the H200's, the same GH100 with 132 SMs, so the 3g, 4g
  // and 7g rows, unpublished, take the H200's SMs (60/64/132) rather than a per-slice multiple.
  all.push_back(make({"GH200-144GB", "NVIDIA GH200 144G HBM3e", false, 0x234810DE, {}, {"GH200-144G-HBM3e"},
                      NVML_DEVICE_ARCH_HOPPER, 9, 0, 144 * 1024, false, 132, false},
                     {
                         // [SMI] 1g and 2g rows of a GH200 144G HBM3e (mig-parted PR #139); names of the
                         // others: [PARTED] all-3g.72gb, all-4g.72gb, all-7g.144gb; engines: [MIG-SP] H200 table.
                         {"1g.18gb", kGi1, 19, 17920, 16, {1, 1, 0, 1, 0}, 7},
                         {"1g.18gb+me", kGi1Rev1, 20, 17920, 16, {1, 1, 0, 1, 1}, 1},
                         {"1g.36gb", kGi1Rev2, 15, 36096, 26, {1, 1, 0, 1, 0}, 4},
                         {"2g.36gb", kGi2, 14, 36096, 32, {2, 2, 0, 2, 0}, 3},
                         {"3g.72gb", kGi3, 9, 0, 60, {3, 3, 0, 3, 0}, 2},
                         {"4g.72gb", kGi4, 5, 0, 64, {4, 4, 0, 4, 0}, 1},
                         {"7g.144gb", kGi7, 0, 0, 132, {8, 7, 0, 7, 1}, 1},
                     }));
  for (auto& p : all.back().profiles) {
    if (p.slices >= 3) p.sm_exact = false;
    p.engines_exact = false;  // the H200's, as no table or output gives this board's
  }

  // B200-180GB. [PARTED] 0x290110DE ("B200"); 183359 MiB and 148 SMs as nvidia-smi reports them
  // (driver 570.172.08); compute capability 10.0 [CUDA-CC].
  all.push_back(make({"B200-180GB", "NVIDIA B200", true, 0x290110DE, {}, {"B200"}, NVML_DEVICE_ARCH_BLACKWELL, 10,
                      0, 183359, true, 148, true},
                     {
                         // [SMI] 1g and 2g rows of a B200 (mig-parted PR #166); the rest: [MIG-SP] B200 180GB
                         // table (names, copy engines, OFA, instances; NVDEC/JPEG as it prints them).
                         {"1g.23gb", kGi1, 19, 22528, 18, {2, 1, 0, 1, 0}, 7},
                         {"1g.23gb+me", kGi1Rev1, 20, 22528, 18, {2, 1, 0, 1, 1}, 1},
                         {"1g.45gb", kGi1Rev2, 15, 45312, 30, {2, 1, 0, 1, 0}, 4},
                         {"2g.45gb", kGi2, 14, 45312, 36, {4, 2, 0, 2, 0}, 3},
                         {"3g.90gb", kGi3, 9, 0, 0, {6, 1, 0, 1, 0}, 2},
                         {"4g.90gb", kGi4, 5, 0, 0, {8, 1, 0, 1, 0}, 1},
                         // 7g.180gb: [MIG-SP] gives it "Full" SMs, the whole GPU's 148.
                         {"7g.180gb", kGi7, 0, 0, 148, {16, 1, 0, 1, 1}, 1},
                     }));
  // The table's NVDEC/JPEG column is 1 on every row, where the driver shows 2g.45gb with 2 of
  // each: the 3g, 4g and 7g engine counts are taken as printed but not as exact.
  for (auto& p : all.back().profiles)
    if (p.slices >= 3) p.engines_exact = false;

  // GB200. [PARTED] 0x294110DE ("GB200 HGX"); compute capability 10.0 [CUDA-CC]. No published
  // device total: 186 GiB stands in; the NVML name follows NVIDIA's product name.
  all.push_back(make({"GB200", "NVIDIA GB200", false, 0x294110DE, {}, {"GB200-186GB"}, NVML_DEVICE_ARCH_BLACKWELL, 10,
                      0, 186 * 1024, false, 0, false},
                     {
                         // [SMI] 1g and 2g rows of a production GB200 (mig-parted issue #227); names of the
                         // others: [PARTED] all-3g.93gb, all-4g.93gb, all-7g.186gb; engines as the B200's.
                         {"1g.23gb", kGi1, 19, 22528, 18, {2, 1, 0, 1, 0}, 7},
                         {"1g.23gb+me", kGi1Rev1, 20, 22528, 18, {2, 1, 0, 1, 1}, 1},
                         {"1g.47gb", kGi1Rev2, 15, 46592, 32, {2, 1, 0, 1, 0}, 4},
                         {"2g.47gb", kGi2, 14, 46592, 38, {4, 2, 0, 2, 0}, 3},
                         {"3g.93gb", kGi3, 9, 0, 0, {6, 1, 0, 1, 0}, 2},
                         {"4g.93gb", kGi4, 5, 0, 0, {8, 1, 0, 1, 0}, 1},
                         {"7g.186gb", kGi7, 0, 0, 0, {16, 1, 0, 1, 1}, 1},
                     }));
  for (auto& p : all.back().profiles) p.engines_exact = false;  // the B200's (issue #227 shows only CE and DEC)
  return all;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

const CiProfile* GiProfile::compute_by_id(uint32_t id) const {
  for (const auto& c : compute_profiles)
    if (c.profile_id == id) return &c;
  return nullptr;
}

const CiProfile* GiProfile::compute_by_index(uint32_t index) const {
  for (const auto& c : compute_profiles)
    if (c.nvml_index == index) return &c;
  return nullptr;
}

// [R525-A3] nvidia-smi -lgip of an H100 80GB HBM3 on driver 525.125.06 (a GCP A3 machine) gives
// 1g.10gb and 1g.10gb+me 9.62 GiB, 1g.20gb and 2g.20gb 19.50 GiB, 3g.40gb 39.25 GiB: 128-256 MiB
// less than the later drivers' figures above. Where between R525 and R550 it changed is not known:
// the R525 branch and older report the older figures; the other profiles are as above.
uint64_t profile_memory_mib(const Gpu& model, const GiProfile& p, std::string_view driver_version) {
  unsigned major = 0;
  for (char c : driver_version) {
    if (c < '0' || c > '9') break;
    major = major * 10 + unsigned(c - '0');
  }
  if (model.name == "H100-SXM5-80GB" && major > 0 && major < 530) {
    if (p.name == "1g.10gb" || p.name == "1g.10gb+me") return 9856;
    if (p.name == "1g.20gb" || p.name == "2g.20gb") return 19968;
    if (p.name == "3g.40gb") return 40192;
  }
  return p.memory_mib;
}

const GiProfile* Gpu::profile_by_id(uint32_t id) const {
  for (const auto& p : profiles)
    if (p.profile_id == id) return &p;
  return nullptr;
}

const GiProfile* Gpu::profile_by_index(uint32_t index) const {
  for (const auto& p : profiles)
    if (p.nvml_index == index) return &p;
  return nullptr;
}

bool Gpu::has_gpm() const {
  // nvml.h: the nvmlGpm* calls are "For Hopper or newer fully supported devices".
  return architecture != NVML_DEVICE_ARCH_UNKNOWN && architecture >= NVML_DEVICE_ARCH_HOPPER;
}

std::span<const Gpu> gpus() {
  static const std::vector<Gpu> table = build();
  return table;
}

const Gpu* find_gpu(std::string_view name) {
  std::string wanted = lower(name);
  for (const auto& g : gpus()) {
    if (lower(g.name) == wanted || lower(g.nvml_name) == wanted) return &g;
    for (const auto& a : g.aliases)
      if (lower(a) == wanted) return &g;
  }
  return nullptr;
}

std::vector<std::string> nearest_gpu_names(std::string_view name, size_t count) {
  std::string wanted = lower(name);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& g : gpus()) {
    size_t best = edit_distance(wanted, lower(g.name));
    for (const auto& a : g.aliases) best = std::min(best, edit_distance(wanted, lower(a)));
    scored.emplace_back(best, g.name);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < count; ++i) out.push_back(scored[i].second);
  return out;
}

}  // namespace tessera::sim::hw
