#include "fleet/controller.hpp"

#include <sstream>

#include "config/mig_parted.hpp"
#include "core/text.hpp"

namespace tessera::fleet {

using json = nlohmann::json;

std::string_view to_string(ControllerPhase phase) {
  switch (phase) {
    case ControllerPhase::watching: return "watching";
    case ControllerPhase::proposed: return "proposed";
    case ControllerPhase::propagating: return "propagating";
    case ControllerPhase::rolling: return "rolling";
    case ControllerPhase::done: return "done";
    case ControllerPhase::failed: return "failed";
  }
  return "?";
}

Controller::Controller(FleetApi& api, ControllerOptions options) : api_(api), options_(std::move(options)) {
  metrics_.phase = std::string(to_string(phase_));
}

Result<Controller::Facts> Controller::read_facts() {
  auto list = api_.snapshot();
  if (!list) return unexpected(list.error());
  auto snap = parse_snapshot(*list, "the cluster");
  if (!snap) return unexpected(snap.error());
  auto cm = api_.get_configmap(options_.mig_configmap);
  if (!cm) return unexpected(cm.error());
  Facts f;
  f.snapshot = std::move(*snap);
  if (!*cm) return fail(Errc::not_found, "no ConfigMap " + options_.mig_configmap + " (the node agents' mig-parted file)");
  auto it = (*cm)->data.find(options_.mig_configmap_key);
  if (it == (*cm)->data.end())
    return fail(Errc::not_found, "ConfigMap " + options_.mig_configmap + " has no key " + options_.mig_configmap_key);
  f.mig_text = it->second;
  config::Diagnostics diags;
  auto parsed = config::parse_mig_parted(f.mig_text, "ConfigMap " + options_.mig_configmap, diags);
  if (!parsed || diags.has_errors()) {
    std::string why = diags.items().empty() ? "not a mig-parted file" : diags.items().front().message;
    return fail(Errc::validation, "ConfigMap " + options_.mig_configmap + ": " + why);
  }
  f.configs = std::move(*parsed);
  return f;
}

void Controller::publish_status(const std::string& status) {
  if (auto r = api_.put_configmap(kPlanConfigMap, {{"status", status}}, {}); !r) error_ = r.error().message;
}

Clock::time_point Controller::step(Clock::time_point now) {
  switch (phase_) {
    case ControllerPhase::watching:
    case ControllerPhase::done:
    case ControllerPhase::failed: watch(now); break;
    case ControllerPhase::proposed: check_approval(now); break;
    case ControllerPhase::propagating:
      if (now >= propagated_at_) {
        phase_ = ControllerPhase::rolling;
        roll(now);
      }
      break;
    case ControllerPhase::rolling: roll(now); break;
  }
  metrics_.phase = std::string(to_string(phase_));
  return now + options_.poll;
}

void Controller::watch(Clock::time_point now) {
  // A person may ask for a plan by changing the replan annotation.
  if (auto cm = api_.get_configmap(kPlanConfigMap); cm && *cm) {
    auto it = (*cm)->annotations.find(kReplanAnnotation);
    if (it != (*cm)->annotations.end() && it->second != replan_seen_) {
      requested_ = requested_ || !it->second.empty();
      replan_seen_ = it->second;
    }
  }
  auto facts = read_facts();
  if (!facts) {
    error_ = facts.error().message;
    return;
  }
  std::set<std::string> pending;
  metrics_.pending_gpu_pods = metrics_.pending_gpu_devices = 0;
  for (const auto& pod : facts->snapshot.pods)
    if (pod.node.empty()) {
      pending.insert(pod.id);
      ++metrics_.pending_gpu_pods;
      metrics_.pending_gpu_devices += pod.count;
      pending_since_.emplace(pod.id, now);
    }
  std::erase_if(pending_since_, [&](const auto& kv) { return !pending.contains(kv.first); });
  bool overdue = false;
  for (const auto& [id, since] : pending_since_) overdue = overdue || now - since >= options_.pending_after;
  if (phase_ == ControllerPhase::failed && !requested_) return;
  if (requested_ || (overdue && facts->snapshot.hash != last_planned_snapshot_)) {
    std::string why = requested_ ? "on request" : std::to_string(pending.size()) + " GPU pod(s) pending";
    requested_ = false;
    propose(now, why);
  }
}

void Controller::propose(Clock::time_point now, const std::string& why, bool approve_now) {
  auto facts = read_facts();
  if (!facts) {
    error_ = facts.error().message;
    return;
  }
  auto problem = build_problem(facts->snapshot, facts->configs);
  if (!problem) {
    error_ = problem.error().message;
    (void)api_.event("Warning", "FleetPlanFailed", "cannot plan: " + excerpt(error_, 900));
    last_planned_snapshot_ = facts->snapshot.hash;
    return;
  }
  FleetPlan plan = plan_fleet(*problem, options_.plan);
  ++metrics_.plans_made;
  metrics_.plan_status = plan.status;
  last_planned_snapshot_ = facts->snapshot.hash;
  if (auto ok = check_fleet_plan(*problem, plan, options_.plan); !ok) {
    error_ = "the plan breaks a rule (a bug in tessera): " + ok.error().message;
    (void)api_.event("Warning", "FleetPlanFailed", error_);
    return;
  }
  plan_json_ = plan_json(*problem, plan);
  // The plan stands on the snapshot and on the mig-parted file's text: a change to either makes it stale.
  snapshot_hash_ = facts->snapshot.hash + "/" + hash_text(facts->mig_text);
  hash_ = hash_text(plan_json_.dump() + "\n" + snapshot_hash_);
  waves_.clear();
  for (const auto& wave : plan_json_["rollout"]) waves_.push_back(wave.get<std::vector<std::string>>());
  node_config_.clear();
  for (const auto& n : plan_json_["nodes"])
    if (n["changed"].get<bool>()) node_config_[n["name"].get<std::string>()] = n["mig.config"].get<std::string>();
  generated_ = json::object();
  for (const auto& cfg : plan.generated.configs) generated_[cfg.name] = plan_json_["mig-parted"]["mig-configs"][cfg.name];
  metrics_.waves_total = int64_t(waves_.size());
  metrics_.waves_done = 0;
  std::string summary = plan_text(*problem, plan);
  bool nothing = waves_.empty();
  std::string status = nothing ? "nothing to change (" + why + ")"
                               : "proposed (" + why + "): approve with kubectl annotate configmap " + kPlanConfigMap + " " +
                                     kApproveAnnotation + "=" + hash_;
  auto put = api_.put_configmap(kPlanConfigMap,
                                {{"summary", summary}, {"plan.json", plan_json_.dump(2)}, {"hash", hash_}, {"status", status}},
                                {{kPlanHashAnnotation, hash_}, {kApproveAnnotation, std::nullopt}});
  if (!put) {
    error_ = put.error().message;
    return;
  }
  if (nothing) {
    phase_ = ControllerPhase::watching;
    return;
  }
  (void)api_.event("Normal", "FleetPlanProposed",
                   "plan " + hash_ + " (" + plan.status + "): " + std::to_string(plan.objective.unserved) + " unserved, " +
                       std::to_string(plan.objective.evicted) + " evicted, " + std::to_string(plan.objective.changed_gpus) +
                       " GPUs changed in " + std::to_string(waves_.size()) + " wave(s)" +
                       (options_.auto_approve ? "; approved automatically" : "; waiting for approval"));
  phase_ = ControllerPhase::proposed;
  // Approved automatically at once, but never again in the same step: a plan found stale is
  // planned again and waits for the next poll, so a changing cluster costs one plan per poll.
  if (options_.auto_approve && approve_now) start_rollout(now);
}

void Controller::check_approval(Clock::time_point now) {
  if (options_.auto_approve) {
    start_rollout(now);
    return;
  }
  auto cm = api_.get_configmap(kPlanConfigMap);
  if (!cm) {
    error_ = cm.error().message;
    return;
  }
  if (!*cm) {  // someone deleted it: propose again
    propose(now, "the plan's ConfigMap was deleted");
    return;
  }
  auto it = (*cm)->annotations.find(kApproveAnnotation);
  if (it == (*cm)->annotations.end() || it->second.empty()) return;
  if (it->second != hash_) {
    if (it->second != error_) {
      (void)api_.event("Warning", "FleetPlanNotApproved",
                       "approval " + excerpt(it->second, 80) + " does not name the plan proposed (" + hash_ + ")");
      error_ = it->second;
    }
    return;
  }
  start_rollout(now);
}

void Controller::start_rollout(Clock::time_point now) {
  auto facts = read_facts();
  if (!facts) {
    error_ = facts.error().message;
    return;
  }
  if (facts->snapshot.hash + "/" + hash_text(facts->mig_text) != snapshot_hash_) {
    (void)api_.event("Warning", "FleetPlanStale",
                     "plan " + hash_ + " was approved, but the cluster changed since it was made; it is refused and planned again");
    publish_status("refused: the cluster changed after plan " + hash_ + " was made; planning again");
    propose(now, "the approved plan was stale", /*approve_now=*/false);
    return;
  }
  if (options_.dry_run) {
    (void)api_.event("Normal", "FleetPlanApproved", "plan " + hash_ + " approved; --dry-run: nothing is changed");
    publish_status("approved; dry run: nothing changed");
    phase_ = ControllerPhase::done;
    return;
  }
  (void)api_.event("Normal", "FleetPlanApproved", "plan " + hash_ + " approved: rolling out " + std::to_string(waves_.size()) + " wave(s)");
  wave_ = 0;
  wave_started_ = false;
  if (!generated_.empty()) {
    auto text = add_mig_configs(facts->mig_text, generated_);
    if (!text) {
      fail_rollout("cannot add the plan's configs to ConfigMap " + options_.mig_configmap + ": " + text.error().message);
      return;
    }
    if (*text != facts->mig_text) {
      if (auto r = api_.put_configmap(options_.mig_configmap, {{options_.mig_configmap_key, *text}}, {}); !r) {
        fail_rollout("cannot update ConfigMap " + options_.mig_configmap + ": " + r.error().message);
        return;
      }
      publish_status("applying: the plan's configs added to " + options_.mig_configmap + ", waiting for the nodes to see them");
      phase_ = ControllerPhase::propagating;
      propagated_at_ = now + options_.config_propagation;
      return;
    }
  }
  phase_ = ControllerPhase::rolling;
  roll(now);
}

void Controller::roll(Clock::time_point now) {
  if (wave_ >= waves_.size()) {
    phase_ = ControllerPhase::done;
    publish_status("done: plan " + hash_ + " applied in " + std::to_string(waves_.size()) + " wave(s)");
    (void)api_.event("Normal", "FleetPlanApplied", "plan " + hash_ + " applied in " + std::to_string(waves_.size()) + " wave(s)");
    return;
  }
  const auto& wave = waves_[wave_];
  if (!wave_started_) {
    for (const auto& node : wave) {
      auto r = api_.label_node(node, {{kMigConfigLabel, node_config_[node]}, {kMigStateLabel, std::nullopt}});
      if (!r) {
        fail_rollout("cannot label node " + node + ": " + r.error().message);
        return;
      }
    }
    wave_started_ = true;
    wave_deadline_ = now + options_.wave_timeout;
    publish_status("applying wave " + std::to_string(wave_ + 1) + " of " + std::to_string(waves_.size()) + ": " + join(wave, " "));
    return;
  }
  auto list = api_.snapshot();
  if (!list) {
    error_ = list.error().message;
    return;
  }
  std::map<std::string, std::string> state;
  for (const auto& item : (*list)["items"])
    if (item.value("kind", "") == "Node") {
      const auto& labels = item["metadata"].value("labels", json::object());
      state[item["metadata"].value("name", "")] = labels.value(kMigStateLabel, "");
    }
  size_t ok = 0;
  for (const auto& node : wave) {
    const std::string& s = state[node];
    if (s == "failed") {
      fail_rollout("node " + node + " reports " + kMigStateLabel + "=failed in wave " + std::to_string(wave_ + 1) +
                   " (its Events say why); the later waves are left as they are");
      return;
    }
    if (s == "success") ++ok;
  }
  if (ok == wave.size()) {
    ++wave_;
    ++metrics_.waves_done;
    wave_started_ = false;
    roll(now);
    return;
  }
  if (now >= wave_deadline_)
    fail_rollout("wave " + std::to_string(wave_ + 1) + " did not reach success within " +
                 std::to_string(options_.wave_timeout.count() / 1000) + " s; the later waves are left as they are");
}

void Controller::fail_rollout(const std::string& why) {
  phase_ = ControllerPhase::failed;
  error_ = why;
  publish_status("failed: " + why);
  (void)api_.event("Warning", "FleetRolloutFailed", "plan " + hash_ + ": " + why);
}

std::string Controller::metrics_text() const {
  std::ostringstream out;
  auto gauge = [&](const char* name, const char* help, int64_t v) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n" << name << " " << v << "\n";
  };
  gauge("tessera_fleet_pending_gpu_pods", "GPU pods without a node.", metrics_.pending_gpu_pods);
  gauge("tessera_fleet_pending_gpu_devices", "GPU devices the pending GPU pods ask for.", metrics_.pending_gpu_devices);
  out << "# HELP tessera_fleet_plans_total Plans made.\n# TYPE tessera_fleet_plans_total counter\ntessera_fleet_plans_total "
      << metrics_.plans_made << "\n";
  out << "# HELP tessera_fleet_plan_status The last plan's status (1 for the status it had).\n# TYPE tessera_fleet_plan_status gauge\n";
  for (const char* s : {"optimal", "feasible", "infeasible"})
    out << "tessera_fleet_plan_status{status=\"" << s << "\"} " << (metrics_.plan_status == s ? 1 : 0) << "\n";
  gauge("tessera_fleet_waves_done", "Waves of the current plan rolled out.", metrics_.waves_done);
  gauge("tessera_fleet_waves_total", "Waves of the current plan.", metrics_.waves_total);
  out << "# HELP tessera_fleet_phase The controller's phase (1 for the current one).\n# TYPE tessera_fleet_phase gauge\n";
  for (auto p : {ControllerPhase::watching, ControllerPhase::proposed, ControllerPhase::propagating, ControllerPhase::rolling,
                 ControllerPhase::done, ControllerPhase::failed})
    out << "tessera_fleet_phase{phase=\"" << to_string(p) << "\"} " << (phase_ == p ? 1 : 0) << "\n";
  return out.str();
}

Result<std::string> add_mig_configs(const std::string& text, const json& configs) {
  config::Diagnostics diags;
  auto parsed = config::parse_mig_parted(text, "the mig-parted ConfigMap", diags);
  if (!parsed || diags.has_errors()) return fail(Errc::validation, "the mig-parted file does not parse");
  json missing = json::object();
  for (auto it = configs.begin(); it != configs.end(); ++it)
    if (!parsed->find(it.key())) missing[it.key()] = *it;
  if (missing.empty()) return text;
  // Append under mig-configs when it is the file's last top-level key.
  std::string last_key;
  int indent = 2;
  bool in_configs = false, indent_known = false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != ' ') {
      last_key = line.substr(0, line.find(':'));
      in_configs = last_key == "mig-configs";
      continue;
    }
    if (in_configs && !indent_known) {
      size_t n = line.find_first_not_of(' ');
      if (n != std::string::npos && line[n] != '#') {
        indent = int(n);
        indent_known = true;
      }
    }
  }
  if (last_key == "mig-configs" && text.find('\t') == std::string::npos) {
    std::string out = text;
    if (!out.empty() && out.back() != '\n') out += '\n';
    out += "\n" + std::string(size_t(indent), ' ') + "# Added by tessera fleet run.\n";
    for (auto it = missing.begin(); it != missing.end(); ++it) out += mig_config_yaml(it.key(), *it, indent);
    config::Diagnostics check;
    auto again = config::parse_mig_parted(out, "the mig-parted ConfigMap", check);
    bool all = again && !check.has_errors();
    for (auto it = configs.begin(); all && it != configs.end(); ++it) all = again->find(it.key()) != nullptr;
    if (all) return out;
  }
  json doc = {{"version", "v1"}, {"mig-configs", mig_configs_json(*parsed)}};
  for (auto it = missing.begin(); it != missing.end(); ++it) doc["mig-configs"][it.key()] = *it;
  return "# Written again by tessera fleet run (its configs added).\n" + mig_parted_yaml_of(doc);
}

}  // namespace tessera::fleet
