#include "nvml/inventory.hpp"

#include <algorithm>
#include <iterator>

namespace tessera::nvml {

using namespace abi;

namespace {

#define TRY_ASSIGN(var, expr)                                        \
  auto var##_result = (expr);                                        \
  if (!var##_result) return unexpected<Error>(var##_result.error()); \
  auto& var = *var##_result

std::string gi_profile_name(const GpuModel* model, const GpuInstanceProfileInfo& info) {
  if (!info.name.empty()) {
    // The driver says "MIG 1g.10gb"; tessera says "1g.10gb", as nvidia.com/mig-* resources do.
    std::string n = info.name;
    if (n.starts_with("MIG ")) n = n.substr(4);
    return n;
  }
  if (model)
    if (const auto* p = model->profile_by_id(info.id)) return p->name;
  return "profile " + std::to_string(info.id);
}

std::string ci_profile_name(const GpuModel* model, uint32_t gi_profile_id, uint32_t ci_profile_id) {
  if (model)
    if (const auto* gp = model->profile_by_id(gi_profile_id))
      for (const auto& cp : gp->compute_profiles)
        if (cp.profile_id == ci_profile_id) return cp.name;
  return "compute profile " + std::to_string(ci_profile_id);
}

// Missing privileges cost a part of the record, noted; other errors are errors.
bool degrade(const Error& e, GpuRecord& rec) {
  if (e.code != NVML_ERROR_NO_PERMISSION) return false;
  rec.notes.push_back(e.message());
  return true;
}

Result<void> collect_instances(const Device& gpu, const GpuModel* model, GpuRecord& rec);
Result<void> collect_mig_devices(const Device& gpu, GpuRecord& rec);

Result<GpuRecord> collect_gpu(const Device& gpu, uint32_t index) {
  GpuRecord rec;
  rec.index = index;
  TRY_ASSIGN(name, gpu.name());
  TRY_ASSIGN(uuid, gpu.uuid());
  TRY_ASSIGN(pci, gpu.pci_info());
  TRY_ASSIGN(mig, gpu.mig_mode());
  rec.name = name;
  rec.uuid = uuid;
  rec.pci = pci;
  rec.mig = mig;
  if (auto memory = gpu.memory_info())
    rec.memory = *memory;
  else if (!degrade(memory.error(), rec))
    return unexpected<Error>(memory.error());
  if (auto minor = gpu.minor_number()) rec.minor = *minor;
  // What the catalog may not know (a GPU it lacks): best effort, as the driver says.
  if (auto arch = gpu.architecture()) rec.architecture = architecture_name(*arch);
  if (auto cc = gpu.compute_capability(); cc && *cc)
    rec.compute_capability = std::to_string(*cc / 10) + "." + std::to_string(*cc % 10);
  if (auto brand = gpu.brand()) rec.brand = brand_name(*brand);
  const GpuModel* model = Catalog::builtin().find_by_pci_id(pci.pci_device_id);
  if (!model) model = Catalog::builtin().find(name);
  if (model) rec.model = model->name;
  if (!mig.current) return rec;
  // Instances and MIG devices are read separately: a user may see one without the other.
  if (auto r = collect_instances(gpu, model, rec); !r) {
    rec.gpu_instances.clear();
    if (!degrade(r.error(), rec)) return unexpected<Error>(r.error());
  }
  if (auto r = collect_mig_devices(gpu, rec); !r) {
    rec.mig_devices.clear();
    if (!degrade(r.error(), rec)) return unexpected<Error>(r.error());
  }
  return rec;
}

Result<void> collect_instances(const Device& gpu, const GpuModel* model, GpuRecord& rec) {
  TRY_ASSIGN(profiles, gpu.gpu_instance_profiles());
  for (const auto& profile : profiles) {
    TRY_ASSIGN(gis, gpu.gpu_instances(profile));
    for (const auto& gi : gis) {
      TRY_ASSIGN(info, gi.info());
      GpuInstanceRecord g{info, gi_profile_name(model, profile), {}};
      TRY_ASSIGN(cis, gi.compute_instances());
      for (const auto& ci : cis) {
        TRY_ASSIGN(ci_info, ci.info());
        g.compute_instances.push_back({ci_info, ci_profile_name(model, info.profile_id, ci_info.profile_id)});
      }
      std::sort(g.compute_instances.begin(), g.compute_instances.end(),
                [](const auto& a, const auto& b) { return a.info.id < b.info.id; });
      rec.gpu_instances.push_back(std::move(g));
    }
  }
  std::sort(rec.gpu_instances.begin(), rec.gpu_instances.end(),
            [](const auto& a, const auto& b) { return a.info.id < b.info.id; });
  return {};
}

Result<void> collect_mig_devices(const Device& gpu, GpuRecord& rec) {
  TRY_ASSIGN(migs, gpu.indexed_mig_devices());
  for (const auto& [index, m] : migs) {
    TRY_ASSIGN(mig_uuid, m.uuid());
    TRY_ASSIGN(gi_id, m.gpu_instance_id());
    TRY_ASSIGN(ci_id, m.compute_instance_id());
    TRY_ASSIGN(mig_memory, m.memory_info());
    rec.mig_devices.push_back({mig_uuid, index, gi_id, ci_id, mig_memory});
  }
  return {};
}

#undef TRY_ASSIGN

}  // namespace

// nvml.h's NVML_DEVICE_ARCH_* and nvmlBrandType_enum values, named as
// go-nvlib's GetArchitectureAsString / GetBrandAsString name them (the
// strings NVIDIA's DRA driver publishes).
std::string architecture_name(nvmlDeviceArchitecture_t arch) {
  static constexpr const char* kNames[] = {"",       "",       "Kepler", "Maxwell", "Pascal",    "Volta",
                                           "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell", "Orin"};
  if (arch == NVML_DEVICE_ARCH_UNKNOWN) return "Unknown";
  return arch < std::size(kNames) ? kNames[arch] : "";
}

std::string brand_name(nvmlBrandType_t brand) {
  static constexpr const char* kNames[] = {"Unknown",    "Quadro",     "Tesla",     "NVS",         "Grid",
                                           "GeForce",    "Titan",      "NvidiaVApps", "NvidiaVPC", "NvidiaVCS",
                                           "NvidiaVWS",  "NvidiaCloudGaming", "QuadroRTX", "NvidiaRTX", "Nvidia",
                                           "GeForceRTX", "TitanRTX"};
  return brand < std::size(kNames) ? kNames[brand] : "";
}

Result<Inventory> collect_inventory(const Session& session, InventoryOptions options) {
  Inventory inv;
  auto driver = session.driver_version();
  if (!driver) return unexpected<Error>(driver.error());
  inv.driver_version = *driver;
  // Without libcuda the v2 call fails (facts 1.2); the rest still works.
  if (auto cuda = session.cuda_driver_version()) inv.cuda_version = format_cuda_version(*cuda);
  auto count = session.device_count();
  if (!count) return unexpected<Error>(count.error());
  for (uint32_t i = 0; i < *count; ++i) {
    auto gpu = session.device(i);
    auto rec = gpu ? collect_gpu(*gpu, i) : Result<GpuRecord>(unexpected<Error>(gpu.error()));
    if (!rec) {
      if (!options.each_gpu) return unexpected<Error>(rec.error());
      GpuRecord lost;
      lost.index = i;
      lost.error = rec.error().message();
      inv.gpus.push_back(std::move(lost));
      continue;
    }
    inv.gpus.push_back(std::move(*rec));
  }
  return inv;
}

}  // namespace tessera::nvml
