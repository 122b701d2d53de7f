// tessera inventory: the node's GPUs as NVML reports them, with their MIG
// mode, GPU and compute instances and MIG devices; with --quota-ledger-root
// also the memory shares and which backend holds each.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/nvml_driver.hpp"
#include "cli/output.hpp"
#include "core/file_read.hpp"
#include "core/text.hpp"
#include "core/units.hpp"
#include "cuda_quota/driver_limits.hpp"
#include "cuda_quota/env.h"
#include "cuda_quota/limits.hpp"
#include "nvml/inventory.hpp"
#include "sharing/allocate.hpp"

namespace tessera::cli {
namespace {

struct InventoryArgs {
  DriverOptions driver;
  bool json = false;
  bool profiles = false;
  std::string ledger_root;  // the memory shares' quota files; empty: not listed
};

// ------------------------------------------------------------------ memory shares

// One device of a container's memory quota and what holds it.
struct ShareDevice {
  std::string uuid;
  uint64_t quota = 0;
  bool driver = false;  // the driver's limit, read back now, holds it
  std::string cgroup;   // where the driver holds it
  std::string note;     // why the library alone holds it, where the hook recorded the driver
};

struct Share {
  std::string key;
  std::vector<ShareDevice> devices;
  std::string error;  // its limits file is not readable
};

// Every <root>/<key>/limits, each device checked against the memory hook's
// record and, for what it names, against the driver's limit as it stands.
std::vector<Share> read_shares(const std::string& root, const nvml::Session& session) {
  std::vector<Share> out;
  std::error_code ec;
  std::vector<std::filesystem::path> dirs;
  for (const auto& e : std::filesystem::directory_iterator(root, ec))
    if (e.is_directory(ec) && !e.is_symlink(ec) && std::filesystem::exists(e.path() / TESSERA_LIMITS_FILE_NAME, ec))
      dirs.push_back(e.path());
  std::ranges::sort(dirs);
  for (const auto& dir : dirs) {
    Share share;
    share.key = dir.filename().string();
    auto text = read_whole_file((dir / TESSERA_LIMITS_FILE_NAME).string(), quota::kLimitsMaxBytes);
    quota::Limits limits;
    char why[256];
    if (!text) share.error = text.error().message;
    else if (!quota::parse_limits(text->data(), text->size(), limits, why, sizeof why))
      share.error = "its limits file is not valid: " + std::string(why);
    quota::DriverLimits record;
    const bool have_record = quota::read_driver_limits(dir.c_str(), record, why, sizeof why);
    const std::string record_problem = have_record ? "" : why;
    for (uint32_t k = 0; share.error.empty() && k < limits.device_count; ++k) {
      ShareDevice d{limits.devices[k].uuid, limits.devices[k].quota, false, "", ""};
      if (!record_problem.empty()) d.note = "the memory hook's record is not valid: " + record_problem;
      if (const auto* held = quota::find_driver_limit(record, d.uuid.c_str())) {
        d.cgroup = held->cgroup;
        auto device = session.device_by_uuid(d.uuid);
        auto got = device ? device->memory_limits(d.cgroup) : unexpected(device.error());
        if (!got) d.note = "the driver's limit cannot be read: " + got.error().message();
        else if (!*got) d.note = "the driver holds no limit for " + d.cgroup + " any more";
        else if ((*got)->hard != quota::driver_limit_bytes(d.quota))
          d.note = "the driver's limit is " + format_bytes((*got)->hard) + ", not the quota (in whole MiB)";
        else d.driver = true;
      }
      share.devices.push_back(std::move(d));
    }
    out.push_back(std::move(share));
  }
  return out;
}

nlohmann::json shares_json(const std::vector<Share>& shares) {
  auto out = nlohmann::json::array();
  for (const auto& s : shares) {
    nlohmann::json j = {{"key", s.key}};
    if (!s.error.empty()) j["error"] = s.error;
    auto devices = nlohmann::json::array();
    for (const auto& d : s.devices) {
      nlohmann::json dj = {{"uuid", d.uuid}, {"quota_bytes", d.quota}, {"backend", d.driver ? "driver" : "library"}};
      if (d.driver) dj["cgroup"] = d.cgroup;
      if (!d.note.empty()) dj["note"] = d.note;
      devices.push_back(std::move(dj));
    }
    j["devices"] = devices;
    out.push_back(std::move(j));
  }
  return out;
}

void print_shares(const std::vector<Share>& shares, std::ostream& out) {
  out << '\n';
  if (shares.empty()) {
    out << "no memory shares\n";
    return;
  }
  Table table({"SHARE", "DEVICE", "QUOTA", "BACKEND", "CGROUP"});
  for (const auto& s : shares) {
    if (!s.error.empty()) table.add({s.key, "-", "-", "-", "-"});
    for (const auto& d : s.devices)
      table.add({s.key, d.uuid, format_bytes(d.quota), d.driver ? "driver" : "library", d.driver ? d.cgroup : "-"});
  }
  table.print(out);
  for (const auto& s : shares) {
    if (!s.error.empty()) out << s.key << ": " << s.error << '\n';
    for (const auto& d : s.devices)
      if (!d.note.empty()) out << s.key << ": " << d.uuid << ": " << d.note << '\n';
  }
}

nlohmann::json memory_json(const nvml::MemoryInfo& m) {
  return {{"total_bytes", m.total}, {"used_bytes", m.used}, {"free_bytes", m.free}, {"reserved_bytes", m.reserved}};
}

nlohmann::json placement_json(const Placement& p) { return {{"start", p.start}, {"size", p.size}}; }

nlohmann::json to_json(const nvml::Inventory& inv) {
  auto gpus = nlohmann::json::array();
  for (const auto& g : inv.gpus) {
    if (!g.error.empty()) {  // a GPU that cannot be read: its index and why
      gpus.push_back({{"index", g.index}, {"error", g.error}});
      continue;
    }
    auto gis = nlohmann::json::array();
    for (const auto& gi : g.gpu_instances) {
      auto cis = nlohmann::json::array();
      for (const auto& ci : gi.compute_instances)
        cis.push_back({{"id", ci.info.id},
                       {"profile", ci.profile},
                       {"profile_id", ci.info.profile_id},
                       {"placement", placement_json(ci.info.placement)}});
      gis.push_back({{"id", gi.info.id},
                     {"profile", gi.profile},
                     {"profile_id", gi.info.profile_id},
                     {"placement", placement_json(gi.info.placement)},
                     {"compute_instances", cis}});
    }
    auto migs = nlohmann::json::array();
    for (const auto& m : g.mig_devices)
      migs.push_back({{"uuid", m.uuid},
                      {"index", m.index},
                      {"gpu_instance", m.gpu_instance_id},
                      {"compute_instance", m.compute_instance_id},
                      {"memory", memory_json(m.memory)}});
    nlohmann::json gpu = {{"index", g.index},
                          {"name", g.name},
                          {"model", g.model},
                          {"uuid", g.uuid},
                          {"pci_bus_id", g.pci.bus_id},
                          {"pci_device_id", format_pci_id(g.pci.pci_device_id)},
                          {"memory", memory_json(g.memory)},
                          {"mig", {{"current", g.mig.current}, {"pending", g.mig.pending}}},
                          {"gpu_instances", gis},
                          {"mig_devices", migs}};
    gpu["minor"] = g.minor ? nlohmann::json(*g.minor) : nlohmann::json(nullptr);
    if (!g.notes.empty()) gpu["notes"] = g.notes;
    gpus.push_back(std::move(gpu));
  }
  return {{"driver_version", inv.driver_version}, {"cuda_version", inv.cuda_version}, {"gpus", gpus}};
}

std::string on_off(bool b) { return b ? "on" : "off"; }

void print_table(const nvml::Inventory& inv, std::ostream& out) {
  out << "driver " << inv.driver_version << ", CUDA " << (inv.cuda_version.empty() ? "?" : inv.cuda_version) << ", "
      << counted(inv.gpus.size(), "GPU") << '\n';
  Table gpus({"GPU", "MODEL", "UUID", "PCI", "MEMORY", "USED", "MIG", "MIG-PENDING"});
  for (const auto& g : inv.gpus)
    if (g.error.empty())
      gpus.add({std::to_string(g.index), g.model.empty() ? g.name : g.model, g.uuid, g.pci.bus_id,
                format_bytes(g.memory.total), format_bytes(g.memory.used), on_off(g.mig.current), on_off(g.mig.pending)});
    else
      gpus.add({std::to_string(g.index), "UNREADABLE", "-", "-", "-", "-", "-", "-"});
  gpus.print(out);  // why a GPU is UNREADABLE: run_inventory says it on stderr
  for (const auto& g : inv.gpus)
    for (const auto& note : g.notes) out << "GPU " << g.index << ": not readable: " << note << '\n';
  bool any = false;
  Table instances({"GPU", "GI", "PROFILE", "PLACEMENT", "CI", "CI-PROFILE", "MIG-DEVICE", "MEMORY", "USED"});
  for (const auto& g : inv.gpus)
    for (const auto& gi : g.gpu_instances) {
      std::string where = std::to_string(gi.info.placement.start) + ":" + std::to_string(gi.info.placement.size);
      if (gi.compute_instances.empty())
        instances.add(
            {std::to_string(g.index), std::to_string(gi.info.id), gi.profile, where, "-", "-", "-", "-", "-"});
      for (const auto& ci : gi.compute_instances) {
        std::string uuid = "-", total = "-", used = "-";
        for (const auto& m : g.mig_devices)
          if (m.gpu_instance_id == gi.info.id && m.compute_instance_id == ci.info.id) {
            uuid = m.uuid;
            total = format_bytes(m.memory.total);
            used = format_bytes(m.memory.used);
          }
        instances.add({std::to_string(g.index), std::to_string(gi.info.id), gi.profile, where,
                       std::to_string(ci.info.id), ci.profile, uuid, total, used});
      }
      any = true;
    }
  if (any) {
    out << '\n';
    instances.print(out);
  }
}

// Every GPU-instance profile the driver reports for each GPU, with its
// possible placements (read-only: for comparing a driver with the catalog).
nlohmann::json profiles_json(const nvml::Session& session, uint32_t index) {
  auto gpu = session.device(index);
  if (!gpu) return {{"error", gpu.error().message()}};
  auto profiles = gpu->gpu_instance_profiles();
  if (!profiles) return {{"error", profiles.error().message()}};
  auto out = nlohmann::json::array();
  for (const auto& p : *profiles) {
    nlohmann::json j = {{"index", p.index},
                        {"id", p.id},
                        {"name", p.name},
                        {"slices", p.slice_count},
                        {"instance_count", p.instance_count},
                        {"multiprocessors", p.multiprocessor_count},
                        {"memory_mib", p.memory_mib},
                        {"engines",
                         {{"copy", p.engines.copy},
                          {"decoders", p.engines.decoders},
                          {"encoders", p.engines.encoders},
                          {"jpegs", p.engines.jpegs},
                          {"ofas", p.engines.ofas}}}};
    if (auto placements = gpu->possible_placements(p.id)) {
      auto arr = nlohmann::json::array();
      for (const auto& pl : *placements) arr.push_back(placement_json(pl));
      j["placements"] = arr;
    } else {
      j["placements_error"] = placements.error().message();
    }
    out.push_back(std::move(j));
  }
  return out;
}

int run_inventory(const InventoryArgs& args) {
  auto session = open_nvml(args.driver);
  if (!session) {
    std::cerr << "tessera inventory: " << session.error().message << '\n';
    return kExitInvalid;
  }
  // Every GPU that answers, and the ones that do not named with their error:
  // the moment a GPU falls off the bus is when this command is run.
  auto inv = nvml::collect_inventory(*session, {.each_gpu = true});
  if (!inv) {
    std::cerr << "tessera inventory: " << inv.error().message() << '\n';
    return kExitInvalid;
  }
  int status = kExitOk;
  for (const auto& g : inv->gpus)
    if (!g.error.empty()) {
      std::cerr << "tessera inventory: GPU " << g.index << " cannot be read: " << g.error << '\n';
      status = kExitInvalid;
    }
  std::vector<Share> shares;
  if (!args.ledger_root.empty()) {
    if (!std::filesystem::is_directory(args.ledger_root)) {
      std::cerr << "tessera inventory: --quota-ledger-root " << args.ledger_root << " is not a directory\n";
      return kExitInvalid;
    }
    shares = read_shares(args.ledger_root, *session);
  }
  if (args.json) {
    auto j = to_json(*inv);
    if (args.profiles)
      for (auto& g : j["gpus"])
        if (!g.contains("error")) g["profiles"] = profiles_json(*session, g["index"].get<uint32_t>());
    if (!args.ledger_root.empty()) j["shares"] = shares_json(shares);
    std::cout << j.dump(2) << '\n';
  } else {
    print_table(*inv, std::cout);
    if (!args.ledger_root.empty()) print_shares(shares, std::cout);
  }
  return status;
}

}  // namespace

void add_inventory_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<InventoryArgs>();
  auto* cmd = app.add_subcommand(
      "inventory",
      "List the node's GPUs through NVML: model, UUID, PCI bus id, memory, MIG mode (current and pending),\n"
      "GPU instances with their placements, compute instances and MIG devices with their UUIDs and memory.");
  add_driver_options(*cmd, args->driver);
  cmd->add_flag("--json", args->json, "Print the inventory as JSON");
  cmd->add_flag(
      "--profiles", args->profiles,
      "With --json: add each GPU's GPU-instance profiles and their possible placements, as the driver reports them");
  cmd->add_option("--quota-ledger-root", args->ledger_root,
                  "Also list the memory shares whose quota files are in DIR (the plugin's and the DRA driver's\n"
                  "ledger root, " + std::string(sharing::kDefaultLedgerRoot) +
                      " by default on a node): each device's quota and what holds it, the driver's\n"
                      "own memory limit (read back now) or the quota library alone");
  cmd->callback([args, &exit_code] { exit_code = run_inventory(*args); });
}

}  // namespace tessera::cli
