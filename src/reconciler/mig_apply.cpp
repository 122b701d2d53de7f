#include "reconciler/mig_apply.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "config/mig_parted_validate.hpp"
#include "core/text.hpp"
#include "nvml/device.hpp"
#include "nvml/inventory.hpp"

namespace tessera::reconciler {
namespace {

std::string gpu_label(const NodeGpu& g) {
  return "GPU " + std::to_string(g.state.index) + " (" + (g.state.model ? g.state.model->name : g.name) + ")";
}

// A driver error from a MIG change, with what to do when it is a privilege.
tessera::Error change_failed(const nvml::Error& e) {
  auto err = e.to_error();
  if (e.code == nvml::abi::NVML_ERROR_NO_PERMISSION)
    err.message += " (changing MIG needs root privileges on the host: run `tessera mig apply` as root, or the "
                   "node agent in a privileged container)";
  return err;
}

}  // namespace

Result<uint32_t> run_operation(const nvml::Session& session, const GpuModel& model, const mig::Operation& op,
                               uint32_t last_created_gi) {
  auto dev = session.device(op.gpu);
  if (!dev) return unexpected(dev.error().to_error());
  const auto& profile = model.profiles[op.profile];
  switch (op.kind) {
    case mig::OpKind::set_mig_mode: {
      auto status = dev->set_mig_mode(op.enabled);
      if (!status) return unexpected(change_failed(status.error()));
      // A non-success activation status means the change waits for a reset.
      if (*status != nvml::abi::NVML_SUCCESS) return fail(Errc::conflict, "pending-reset");
      return 0u;
    }
    case mig::OpKind::destroy_compute_instances: {
      auto gi = dev->gpu_instance_by_id(op.gi_id);
      if (!gi) return unexpected(gi.error().to_error());
      auto cis = gi->compute_instances();
      if (!cis) return unexpected(cis.error().to_error());
      for (const auto& ci : *cis)
        if (auto r = ci.destroy(); !r) return unexpected(change_failed(r.error()));
      return 0u;
    }
    case mig::OpKind::destroy_gpu_instance: {
      auto gi = dev->gpu_instance_by_id(op.gi_id);
      if (!gi) return unexpected(gi.error().to_error());
      if (auto r = gi->destroy(); !r) return unexpected(change_failed(r.error()));
      return 0u;
    }
    case mig::OpKind::create_gpu_instance: {
      auto info = dev->gpu_instance_profile(profile.nvml_index);
      if (!info) return unexpected(info.error().to_error());
      auto gi = dev->create_gpu_instance(info->id, Placement{op.start, profile.memory_slices});
      if (!gi) return unexpected(change_failed(gi.error()));
      auto gi_info = gi->info();
      if (!gi_info) return unexpected(gi_info.error().to_error());
      return gi_info->id;
    }
    case mig::OpKind::create_compute_instance: {
      uint32_t gi_id = op.gi_id ? op.gi_id : last_created_gi;
      auto gi = dev->gpu_instance_by_id(gi_id);
      if (!gi) return unexpected(gi.error().to_error());
      const auto* ci_profile = profile.default_compute_profile();
      if (!ci_profile) return fail(Errc::unsupported, profile.name + " has no full compute-instance profile in the catalog");
      auto info = gi->compute_profile(ci_profile->nvml_index);
      if (!info) return unexpected(info.error().to_error());
      auto ci = gi->create_compute_instance(info->id);
      if (!ci) return unexpected(change_failed(ci.error()));
      return gi_id;
    }
  }
  return fail(Errc::internal, "unknown operation");
}

size_t NodePlan::operations() const {
  size_t n = 0;
  for (const auto& g : gpus) n += g.plan.operations.size();
  return n;
}

Result<NodePlan> plan_node(const std::vector<NodeGpu>& node, const config::MigConfig& config, bool force) {
  NodePlan out;
  out.config_name = config.name;
  std::vector<std::string> errors;
  bool only_busy = true;  // every error is instances in use (Errc::conflict): --force would plan it
  bool selected_any = false;
  for (const auto& g : node) {
    GpuOutcome o;
    o.gpu = g.state.index;
    o.uuid = g.state.uuid;
    o.model = g.state.model;
    // The first entry whose devices and device-filter select this GPU.
    const config::MigConfigEntry* entry = nullptr;
    for (size_t i = 0; i < config.entries.size() && !entry; ++i) {
      const auto& e = config.entries[i];
      bool filter_ok = config::filter_selects(e, g.pci_device_id, g.pci_subsystem_id, g.state.model);
      if (filter_ok && e.devices.selects(g.state.index)) {
        entry = &e;
        o.entry = i;
      }
    }
    if (!entry) {
      // mig-parted leaves GPUs that no entry selects as they are.
      out.gpus.push_back(std::move(o));
      continue;
    }
    selected_any = true;
    if (!g.state.model) {
      only_busy = false;
      errors.push_back(gpu_label(g) + ": the GPU catalog does not know this GPU (PCI id " +
                       format_pci_id(g.pci_device_id) + ")");
      continue;
    }
    auto plan = mig::plan_gpu(g.state, {entry->mig_enabled, config::entry_counts(*entry)}, {.force = force});
    if (!plan) {
      errors.push_back(plan.error().message);
      only_busy = only_busy && plan.error().code == Errc::conflict;
      continue;
    }
    o.plan = std::move(*plan);
    for (const auto& inst : g.state.instances) {
      bool kept = std::find(o.plan.kept.begin(), o.plan.kept.end(), inst.gi_id) != o.plan.kept.end();
      if (!inst.uuid.empty()) (kept ? o.kept : o.destroyed).push_back(inst.uuid);
    }
    out.gpus.push_back(std::move(o));
  }
  if (!errors.empty()) {
    std::string msg;
    for (const auto& e : errors) msg += (msg.empty() ? "" : "\n") + e;
    return fail(only_busy ? Errc::conflict : Errc::validation, msg);
  }
  // mig-parted leaves a GPU no entry selects as it is; a config that selects
  // none of the node's GPUs is one written for other GPUs (an A100 config on
  // an H100 node), not a layout the node has: said, never "success".
  if (!node.empty() && !selected_any) {
    std::string gpus;
    for (const auto& g : node)
      gpus += (gpus.empty() ? "" : ", ") + gpu_label(g) + " (PCI id " + format_pci_id(g.pci_device_id) + ")";
    return fail(Errc::validation, "config '" + config.name + "' selects none of this node's GPUs: " + gpus +
                                      "; its entries' devices and device-filter name other GPUs (check with `tessera mig "
                                      "validate -f FILE -c " + config.name + " --gpu MODEL`)");
  }
  return out;
}

ApplyResult execute_plan(const nvml::Session& session, NodePlan plan, const JournalFile& journal_file, Journal& journal,
                         const std::function<void(const Journal&)>& on_step) {
  ApplyResult result;
  bool all_ok = true;
  std::map<uint32_t, std::vector<uint32_t>> created_by_gpu;  // GPU -> GI ids created
  for (auto& g : plan.gpus) {
    if (!g.plan.changes()) continue;
    size_t first_step = journal.steps.size();
    for (const auto& op : g.plan.operations)
      journal.steps.push_back({g.gpu, op.describe(*g.model), "pending", ""});
    if (auto saved = journal_file.save(journal); !saved) {
      result.journal_error = saved.error().message;
      all_ok = false;
      break;
    }
    uint32_t last_gi = 0;
    std::vector<uint32_t> created_gis;
    for (size_t i = 0; i < g.plan.operations.size(); ++i) {
      const auto& op = g.plan.operations[i];
      auto& step = journal.steps[first_step + i];
      auto r = run_operation(session, *g.model, op, last_gi);
      if (!r) {
        if (r.error().message == "pending-reset") {
          g.pending_reset = true;
          step.status = "pending";
          step.detail = "MIG mode change waits for a GPU reset";
        } else {
          g.error = r.error().message;
          step.status = "failed";
          step.detail = r.error().message;
          all_ok = false;
        }
        if (auto saved = journal_file.save(journal); !saved) result.journal_error = saved.error().message;
        break;
      }
      if (op.kind == mig::OpKind::create_gpu_instance) {
        last_gi = *r;
        created_gis.push_back(*r);
        step.detail = "GI " + std::to_string(*r);
      }
      step.status = "done";
      ++g.operations_done;
      if (auto saved = journal_file.save(journal); !saved) {
        result.journal_error = saved.error().message;
        break;
      }
      if (on_step) on_step(journal);
    }
    created_by_gpu[g.gpu] = std::move(created_gis);
    if (!result.journal_error.empty()) {
      // No further step runs unrecorded: the change stops here.
      all_ok = false;
      spdlog::error("the journal cannot be written ({}): the MIG change stops after GPU {}", result.journal_error, g.gpu);
      break;
    }
    result.pending_reset = result.pending_reset || g.pending_reset;
  }
  // The new MIG devices' UUIDs, and after a failure what is still there:
  // one read of the node after every GPU is done.
  bool created_any = std::any_of(created_by_gpu.begin(), created_by_gpu.end(), [](const auto& kv) { return !kv.second.empty(); });
  if (created_any || !all_ok) {
    if (auto inv = nvml::collect_inventory(session); inv) {
      for (auto& g : plan.gpus) {
        const auto& gis = created_by_gpu[g.gpu];
        for (const auto& rec : inv->gpus) {
          if (rec.index != g.gpu) continue;
          for (const auto& m : rec.mig_devices) {
            if (std::find(gis.begin(), gis.end(), m.gpu_instance_id) != gis.end()) g.created.push_back(m.uuid);
            if (auto it = std::find(g.destroyed.begin(), g.destroyed.end(), m.uuid); it != g.destroyed.end()) {
              g.not_destroyed.push_back(m.uuid);
              g.destroyed.erase(it);
            }
          }
        }
      }
    } else {
      spdlog::warn("cannot read the node's MIG devices after the apply: {}", inv.error().message());
    }
  }
  result.success = all_ok;
  result.plan = std::move(plan);
  return result;
}

std::string_view to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::planned: return "planned";
    case Outcome::success: return "success";
    case Outcome::pending_reset: return "pending-reset";
    case Outcome::failed: return "failed";
    case Outcome::refused: return "refused";
  }
  return "?";
}

void mark_in_use(std::vector<NodeGpu>& node, const std::map<std::string, std::vector<std::string>>& in_use) {
  for (auto& g : node) {
    auto whole = in_use.find(g.state.uuid);  // users of the whole GPU use every instance on it
    for (auto& inst : g.state.instances) {
      if (auto it = in_use.find(inst.uuid); !inst.uuid.empty() && it != in_use.end())
        inst.processes.insert(inst.processes.end(), it->second.begin(), it->second.end());
      if (whole != in_use.end()) inst.processes.insert(inst.processes.end(), whole->second.begin(), whole->second.end());
    }
  }
}

Result<ApplyReport> apply_config(const nvml::Session& session, const ApplyRequest& request,
                                 const JournalFile& journal_file) {
  ApplyReport report;
  if (!request.dry_run) {
    auto previous = journal_file.load();
    if (!previous) return unexpected(previous.error());
    if (*previous) {
      report.previous = **previous;
      report.interrupted_before = report.previous.interrupted();
      if (report.interrupted_before)
        spdlog::warn("the previous apply of '{}' was interrupted after {} of {} steps; planning again from the GPUs' "
                     "state", report.previous.config_name, report.previous.done(), report.previous.steps.size());
    }
  }
  // Refused before any step: recorded as this apply's outcome, unless that
  // would overwrite the record of an interrupted one.
  auto refuse = [&](const std::string& message) -> Result<ApplyReport> {
    report.outcome = Outcome::refused;
    report.message = message;
    if (request.dry_run) return report;
    if (auto s = journal_file.write_state("failed"); !s) return unexpected(s.error());
    report.state = "failed";
    if (!report.interrupted_before) {
      report.journal = {request.config_file, request.config_name, utc_now(), utc_now(), "failed", message, {}};
      if (auto s = journal_file.save(report.journal); !s) return unexpected(s.error());
    }
    return report;
  };
  if (!request.config) return fail(Errc::invalid_argument, "apply_config: no config given");
  auto node = read_node_state(session);
  if (!node) return refuse(node.error().message);
  // The instances the driver reports processes on, before the users the caller knows are added:
  // the driver refuses to destroy them (NVML_ERROR_IN_USE), --force or not.
  std::map<std::pair<uint32_t, uint32_t>, std::string> running;  // (GPU, GPU instance) -> processes
  for (const auto& g : *node)
    for (const auto& inst : g.state.instances)
      if (inst.busy())
        running[{g.state.index, inst.gi_id}] = (inst.uuid.empty() ? "" : inst.uuid + " ") + "used by " + join(inst.processes);
  mark_in_use(*node, request.in_use);
  auto plan = plan_node(*node, *request.config, request.force);
  if (!plan) return refuse(plan.error().message);
  // A forced change that would stop at such an instance halfway through the node is refused
  // before its first step.
  std::vector<std::string> blocked;
  for (const auto& g : plan->gpus)
    for (uint32_t gi : g.plan.destroyed)
      if (auto it = running.find({g.gpu, gi}); it != running.end())
        blocked.push_back("GPU " + std::to_string(g.gpu) + " instance " + std::to_string(gi) + " (" + it->second + ")");
  if (!blocked.empty()) {
    std::string list;
    for (const auto& b : blocked) list += "\n  " + b;
    const std::string why =
        "the layout destroys MIG devices with processes running, which the driver refuses to destroy "
        "(NVML_ERROR_IN_USE), --force or not; ";
    const std::string then = list + "\nstop those processes (e.g. drain the node's GPU pods), then apply again";
    if (!request.dry_run) return refuse(why + "nothing was changed:" + then);
    report.message = why + "an apply now would be refused:" + then;  // a plan for once they stop
  }
  if (request.dry_run) {
    report.outcome = Outcome::planned;
    report.plan = std::move(*plan);
    return report;
  }
  // Recorded before anything changes; a record that cannot be written stops it.
  if (auto s = journal_file.write_state("pending"); !s) return unexpected(s.error());
  report.journal = {request.config_file, request.config_name, utc_now(), "", "in-progress", "", {}};
  if (auto s = journal_file.save(report.journal); !s) {
    (void)journal_file.write_state("failed");  // best effort: the label must not stay pending
    return unexpected(s.error());
  }
  auto result = execute_plan(session, std::move(*plan), journal_file, report.journal, request.on_step);
  report.plan = std::move(result.plan);
  report.outcome = !result.success ? Outcome::failed : result.pending_reset ? Outcome::pending_reset : Outcome::success;
  if (!result.journal_error.empty()) report.message = "the journal cannot be written: " + result.journal_error;
  report.journal.finished = utc_now();
  report.journal.outcome = std::string(to_string(report.outcome == Outcome::refused ? Outcome::failed : report.outcome));
  const auto saved = journal_file.save(report.journal);
  report.state = report.outcome == Outcome::failed ? "failed" : report.outcome == Outcome::pending_reset ? "pending" : "success";
  const auto state = journal_file.write_state(report.state);
  if (!saved && report.message.empty()) report.message = "the journal cannot be written: " + saved.error().message;
  if (!state) {
    report.message += (report.message.empty() ? "" : "; ") + state.error().message;
    if (report.outcome != Outcome::failed) report.outcome = Outcome::failed;
  }
  return report;
}

}  // namespace tessera::reconciler
