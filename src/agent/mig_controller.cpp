#include "agent/mig_controller.hpp"

#include <spdlog/spdlog.h>

#include "core/catalog.hpp"
#include "core/text.hpp"
#include "reconciler/mig_apply.hpp"
#include "reconciler/node_state.hpp"

namespace tessera::agent {
namespace {

std::string join_pods(const auto& pods) {
  std::string out;
  for (const auto& p : pods) {
    if constexpr (requires { p.first; }) out += (out.empty() ? "" : ", ") + p.first.display();
    else out += (out.empty() ? "" : ", ") + p.display();
  }
  return out;
}

double seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace

MigController::MigController(const nvml::Session& session, ClusterApi& api, NodeHooks hooks,
                             reconciler::JournalFile journal, MigControllerOptions options)
    : session_(session), api_(api), hooks_(std::move(hooks)), journal_(std::move(journal)), options_(std::move(options)) {}

void MigController::set_desired(std::optional<std::string> config_name) {
  // A label taken away and put back asks again, even for the same name.
  if (!config_name) attempted_.reset();
  desired_ = std::move(config_name);
}

void MigController::set_configs(config::MigPartedConfig configs) { next_configs_ = std::move(configs); }

void MigController::idle(Clock::time_point now) {
  if (next_configs_) {
    options_.configs = std::move(*next_configs_);
    next_configs_.reset();
    attempted_.reset();  // the label is looked up again in the new file
    spdlog::info("{}: reloaded ({} configs)", options_.config_file, options_.configs.configs.size());
  }
  if (desired_ && desired_ != attempted_) begin(now);
}

Clock::time_point MigController::step(Clock::time_point now) {
  if (unwritten_state_ && now >= next_state_write_) {
    const std::string state = *unwritten_state_;
    write_state(state, now);
  }
  if (phase_ == Phase::draining) drain(now);
  if (phase_ == Phase::idle) idle(now);
  Clock::time_point next = Clock::time_point::max();
  if (phase_ == Phase::draining) next = std::min(now + options_.poll_interval, deadline_);
  if (unwritten_state_) next = std::min(next, next_state_write_);
  return next;
}

void MigController::write_state(const std::string& state, Clock::time_point now) {
  if (auto r = api_.set_label(kMigStateLabel, state); !r) {
    spdlog::warn("cannot set {}={} on the Node: {} (trying again in {} s)", kMigStateLabel, state, r.error().message,
                 seconds(options_.retry_interval));
    unwritten_state_ = state;
    next_state_write_ = now + options_.retry_interval;
    return;
  }
  unwritten_state_.reset();
}

Result<std::vector<MigController::Held>> MigController::held() {
  std::map<std::pair<std::string, std::string>, sharing::Device> advertised;
  for (const auto& r : hooks_.advertised())
    for (const auto& d : r.devices) advertised[{r.name, d.id}] = d;
  auto pods = hooks_.pod_devices();
  if (!pods) return unexpected(pods.error());
  std::vector<Held> out;
  for (const auto& pod : *pods)
    for (const auto& c : pod.containers)
      for (const auto& rd : c.resources)
        for (const auto& id : rd.ids)
          if (auto it = advertised.find({rd.resource, id}); it != advertised.end())
            out.push_back({{pod.pod_namespace, pod.name}, id, it->second});
  return out;
}

Result<std::map<PodRef, std::vector<std::string>>> MigController::holders(const std::set<std::string>& uuids) {
  std::map<PodRef, std::vector<std::string>> out;
  if (uuids.empty()) return out;
  auto devices = held();
  if (!devices) return unexpected(devices.error());
  for (const auto& h : *devices)
    if (uuids.contains(h.device.physical_uuid) || uuids.contains(h.device.gpu_uuid)) out[h.pod].push_back(h.id);
  return out;
}

Result<std::map<std::string, std::vector<std::string>>> MigController::in_use() {
  auto devices = held();
  if (!devices) return unexpected(devices.error());
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& h : *devices) {
    // A MIG device's users are its own; a whole GPU's (migStrategy none on a
    // MIG GPU) use every instance on it.
    auto& users = out[h.device.is_mig ? h.device.physical_uuid : h.device.gpu_uuid];
    auto user = "pod " + h.pod.display();
    if (std::find(users.begin(), users.end(), user) == users.end()) users.push_back(user);
  }
  return out;
}

sharing::Inventory predict_inventory(const sharing::Inventory& now, const reconciler::NodePlan& plan,
                                     const config::MigConfig& config) {
  sharing::Inventory out = now;
  for (auto& gpu : out.gpus) {
    auto it = std::find_if(plan.gpus.begin(), plan.gpus.end(), [&](const auto& g) { return g.uuid == gpu.uuid; });
    if (it == plan.gpus.end() || !it->plan.changes() || !it->model || it->entry >= config.entries.size()) continue;
    const auto& g = *it;
    gpu.mig_enabled = config.entries[g.entry].mig_enabled;
    std::erase_if(gpu.mig_devices, [&](const sharing::MigDevice& m) {
      return std::find(g.plan.kept.begin(), g.plan.kept.end(), m.gi_id) == g.plan.kept.end();
    });
    uint32_t n = 0;
    for (const auto& c : g.plan.created) {
      const auto& profile = g.model->profiles[c.profile];
      sharing::MigDevice m;
      m.uuid = "MIG-planned-" + std::to_string(gpu.index) + "-" + std::to_string(n++);
      m.profile = profile.name;
      m.start = c.start;
      m.memory_bytes = profile.memory_mib << 20;
      gpu.mig_devices.push_back(std::move(m));
    }
    std::sort(gpu.mig_devices.begin(), gpu.mig_devices.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
  }
  return out;
}

void MigController::begin(Clock::time_point now) {
  const std::string name = *desired_;
  attempted_ = name;
  current_ = ChangeRecord{};
  current_.config = name;
  current_.started = now;

  const config::MigConfig* config = options_.configs.find(name);
  if (!config) {
    std::vector<std::string> names;
    for (const auto& c : options_.configs.configs) names.push_back(c.name);
    finish(now, "failed",
           options_.config_file + " has no config named " + quote(name) +
               (names.empty() ? std::string() : " (nearest: " + escape_control(join(nearest(name, names, 3))) + ")"));
    return;
  }
  auto users = in_use();
  if (!users) {
    finish(now, "failed", "cannot tell which pods hold which devices: " + users.error().message);
    return;
  }
  auto node = reconciler::read_node_state(session_);
  if (!node) {
    finish(now, "failed", "cannot read the GPUs: " + node.error().message);
    return;
  }
  reconciler::mark_in_use(*node, *users);
  // Keep every instance that holds a pod if the layout allows; otherwise the
  // plan that keeps the most, and the pods in its way leave.
  auto plan = reconciler::plan_node(*node, *config, false);
  if (!plan && plan.error().code == Errc::conflict) plan = reconciler::plan_node(*node, *config, true);
  if (!plan) {
    finish(now, "failed", plan.error().message);
    return;
  }
  if (plan->operations() == 0) {
    spdlog::info("{}={}: the node already has that layout", kMigConfigLabel, name);
    applied_ = name;
    current_.state = "success";
    current_.ended = now;
    write_state("success", now);
    history_.push_back(current_);
    return;
  }
  if (hooks_.served_inventory && hooks_.can_serve) {
    if (auto r = hooks_.can_serve(predict_inventory(hooks_.served_inventory(), *plan, *config)); !r) {
      finish(now, "failed", "the device plugin could not serve the layout " + name + " leads to: " + r.error().message);
      return;
    }
  }
  spdlog::info("{}={}: applying it", kMigConfigLabel, name);
  write_state("pending", now);
  // What goes away: destroyed MIG devices; and a whole GPU whose MIG mode
  // changes, or that is advertised whole while its instances change.
  std::set<std::string> whole;
  for (const auto& r : hooks_.advertised())
    for (const auto& d : r.devices)
      if (!d.is_mig) whole.insert(d.gpu_uuid);
  for (const auto& g : plan->gpus) {
    if (!g.plan.changes()) continue;
    current_.destroyed.insert(g.destroyed.begin(), g.destroyed.end());
    if (g.plan.mode_change || whole.contains(g.uuid)) current_.destroyed.insert(g.uuid);
  }
  if (!current_.destroyed.empty()) {
    hooks_.withdraw(current_.destroyed);
    spdlog::info("the change to {} takes away {}", name, join(std::vector<std::string>(current_.destroyed.begin(), current_.destroyed.end())));
  }
  phase_ = Phase::draining;
  deadline_ = now + options_.eviction_timeout;
  settle_until_ = current_.destroyed.empty() ? now : now + options_.withdraw_settle;
  asked_.clear();
  drain(now);
}

void MigController::drain(Clock::time_point now) {
  if (desired_ != current_.config) {
    // Nothing was applied yet: the new label wins.
    hooks_.withdraw({});
    std::string reason = desired_ ? "the label changed to " + *desired_ + " before it was applied"
                                  : "the label was removed before it was applied";
    spdlog::info("change to {} abandoned: {}", current_.config, reason);
    finish(now, "failed", reason);
    return;
  }
  auto pods = holders(current_.destroyed);
  if (pods && pods->empty() && now >= settle_until_) {
    apply(now);
    return;
  }
  if (pods && pods->empty()) return;  // the kubelet is still being told
  if (now >= deadline_) {
    hooks_.withdraw({});
    std::string reason =
        pods ? "pods still on devices the change destroys after " + fmt::format("{}", seconds(options_.eviction_timeout)) +
                   " s: " + join_pods(*pods)
             : "cannot tell which pods hold the devices the change destroys: " + pods.error().message;
    std::set<PodRef> blocked;
    for (const auto& [pod, when] : asked_)
      if (when != Clock::time_point::max() && pods && pods->contains(pod)) blocked.insert(pod);
    if (!blocked.empty()) reason += " (evictions refused, e.g. by a PodDisruptionBudget: " + join_pods(blocked) + ")";
    finish(now, "failed", reason + "; nothing was changed");
    return;
  }
  if (!pods) {
    spdlog::warn("cannot list the pods on the devices to destroy: {} (trying again)", pods.error().message);
    return;
  }
  for (const auto& [pod, ids] : *pods) {
    auto it = asked_.find(pod);
    if (it != asked_.end() && now < it->second) continue;
    auto r = api_.evict(pod);
    if (!r) {
      spdlog::warn("evicting {}: {} (trying again)", pod.display(), r.error().message);
      asked_[pod] = now + options_.poll_interval;
      continue;
    }
    switch (*r) {
      case Eviction::evicted:
      case Eviction::gone:
        if (*r == Eviction::evicted) {
          spdlog::info("evicted {} (on {})", pod.display(), join(ids));
          current_.evicted.insert(pod);
        }
        asked_[pod] = Clock::time_point::max();
        break;
      case Eviction::blocked:
        if (it == asked_.end()) spdlog::info("eviction of {} refused for now (a PodDisruptionBudget); asking again", pod.display());
        asked_[pod] = now + options_.poll_interval * 5;
        break;
    }
  }
}

void MigController::apply(Clock::time_point now) {
  const auto* config = options_.configs.find(current_.config);
  auto users = in_use();
  if (!users) {
    hooks_.withdraw({});
    finish(now, "failed", "cannot tell which pods hold which devices: " + users.error().message);
    return;
  }
  reconciler::ApplyRequest request;
  request.config_file = options_.config_file;
  request.config_name = current_.config;
  request.config = config;
  request.in_use = std::move(*users);
  auto report = reconciler::apply_config(session_, request, journal_);
  // The new devices are served before the old ids come back into service;
  // if they cannot be, the destroyed ones stay out of it.
  if (auto served = hooks_.layout_changed(); !served) {
    finish(now, "failed", "the device plugin cannot serve the node's new devices: " + served.error().message);
    return;
  }
  hooks_.withdraw({});
  if (!report) {
    finish(now, "failed", report.error().message);
    return;
  }
  std::string why = report->message;
  for (const auto& g : report->plan.gpus)
    if (!g.error.empty()) why += (why.empty() ? "" : "; ") + ("GPU " + std::to_string(g.gpu) + ": " + g.error);
  switch (report->outcome) {
    case reconciler::Outcome::success:
      applied_ = current_.config;
      finish(now, "success", "");
      return;
    case reconciler::Outcome::pending_reset:
      finish(now, "failed",
             "the MIG mode change waits for a GPU reset, which tessera does not do: reset the GPUs or reboot the node "
             "(the label is applied again when tessera starts)");
      return;
    default:
      finish(now, "failed", why.empty() ? std::string(reconciler::to_string(report->outcome)) : why);
      return;
  }
}

void MigController::abandon(Clock::time_point now, const std::string& why) {
  if (phase_ != Phase::draining) return;
  hooks_.withdraw({});
  finish(now, "failed", why + " before the change was applied; nothing was changed");
}

void MigController::finish(Clock::time_point now, const std::string& state, const std::string& reason) {
  phase_ = Phase::idle;
  current_.state = state;
  current_.reason = reason;
  current_.ended = now;
  write_state(state, now);
  Result<void> sent;
  if (state == "success") {
    std::string message = "MIG config " + current_.config + " applied";
    if (!current_.destroyed.empty())
      message += ": " + std::to_string(current_.destroyed.size()) + " device(s) replaced, " +
                 std::to_string(current_.evicted.size()) + " pod(s) evicted" +
                 (current_.evicted.empty() ? "" : " (" + join_pods(current_.evicted) + ")");
    spdlog::info("{}", message);
    sent = api_.event("Normal", "MigConfigApplied", message);
  } else {
    spdlog::error("MIG config {} failed: {}", current_.config, reason);
    sent = api_.event("Warning", "MigConfigFailed", "MIG config " + current_.config + " failed: " + reason);
  }
  if (!sent) spdlog::warn("cannot record the Event on the Node: {}", sent.error().message);
  history_.push_back(current_);
}

}  // namespace tessera::agent
