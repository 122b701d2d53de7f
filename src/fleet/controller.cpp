#include "fleet/controller.hpp"

#include <algorithm>
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
  if (list->version == 0 || list->version != last_version_ || !last_snapshot_) {
    // A List the API hands again unchanged (the same version) is not read again.
    last_snapshot_.reset();
    last_version_ = 0;
    auto snap = parse_snapshot(*list->list, "the cluster", options_.dra_drivers);
    if (!snap) return unexpected(snap.error());
    last_snapshot_ = std::make_shared<const Snapshot>(std::move(*snap));
    last_version_ = list->version;
  }
  auto cm = api_.get_configmap(options_.mig_configmap);
  if (!cm) return unexpected(cm.error());
  Facts f;
  f.snapshot = last_snapshot_;
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

// What a restarted controller needs to go on: the phase, the wave and the facts the plan stood on.
std::string Controller::state_json() const {
  return json{{"phase", std::string(to_string(phase_))},
              {"wave", wave_},
              {"wave_started", wave_started_},
              {"snapshot", snapshot_hash_},
              {"evicted", evicted_}}
      .dump();
}

void Controller::publish_status(const std::string& status) {
  if (auto r = api_.put_configmap(kPlanConfigMap, {{"status", status}, {"state", state_json()}}, {}); !r) error_ = r.error().message;
}

void Controller::load_plan(const json& plan) {
  plan_json_ = plan;
  waves_.clear();
  node_config_.clear();
  for (const auto& wave : plan.at("rollout")) waves_.push_back(wave.get<std::vector<std::string>>());
  for (const auto& n : plan.at("nodes"))
    if (n.at("changed").get<bool>()) node_config_[n.at("name").get<std::string>()] = n.at("mig.config").get<std::string>();
  metrics_.waves_total = int64_t(waves_.size());
  metrics_.waves_done = 0;
}

void Controller::resume(Clock::time_point now) {
  resumed_ = true;
  auto cm = api_.get_configmap(kPlanConfigMap);
  if (!cm || !*cm) return;
  const auto& data = (*cm)->data;
  auto st = data.find("state"), pj = data.find("plan.json"), h = data.find("hash");
  if (st == data.end() || pj == data.end() || h == data.end()) return;
  json state = json::parse(st->second, nullptr, false);
  json plan = json::parse(pj->second, nullptr, false);
  const std::string phase = state.is_object() ? state.value("phase", "") : "";
  if (phase != "proposed" && phase != "propagating" && phase != "rolling") return;  // nothing in flight
  try {
    load_plan(plan);
    generated_ = json::object();
    for (auto it = plan.at("mig-parted").at("mig-configs").begin(); it != plan.at("mig-parted").at("mig-configs").end(); ++it)
      if (it.key().starts_with(kGeneratedPrefix)) generated_[it.key()] = *it;
    wave_ = state.value("wave", size_t(0));
    wave_started_ = state.value("wave_started", false);
    evicted_ = state.value("evicted", int64_t(0));
    snapshot_hash_ = state.value("snapshot", "");
  } catch (const json::exception& e) {
    (void)api_.event("Warning", "FleetPlanNotResumed",
                     "ConfigMap " + std::string(kPlanConfigMap) + " records a plan in phase " + phase +
                         " that cannot be read (" + e.what() + "); watching afresh");
    waves_.clear();
    node_config_.clear();
    plan_json_ = json();
    return;
  }
  hash_ = h->second;
  if (wave_ > waves_.size()) wave_ = waves_.size();
  metrics_.waves_done = int64_t(wave_);
  if (phase == "proposed") {
    phase_ = ControllerPhase::proposed;
  } else if (phase == "propagating") {
    phase_ = ControllerPhase::propagating;
    propagated_at_ = now + options_.config_propagation;
  } else {
    phase_ = ControllerPhase::rolling;
    wave_deadline_ = now + options_.wave_timeout;
  }
  (void)api_.event("Normal", "FleetControllerResumed",
                   "resumed plan " + hash_ + " in phase " + phase + " (wave " + std::to_string(wave_ + 1) + " of " +
                       std::to_string(waves_.size()) + ")");
}

Clock::time_point Controller::step(Clock::time_point now) {
  if (!resumed_) resume(now);
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
  for (const auto& pod : facts->snapshot->pods)
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
  if (requested_ || (overdue && facts->snapshot->hash != last_planned_snapshot_)) {
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
  auto problem = build_problem(*facts->snapshot, facts->configs);
  if (!problem) {
    error_ = problem.error().message;
    (void)api_.event("Warning", "FleetPlanFailed", "cannot plan: " + excerpt(error_, 900));
    last_planned_snapshot_ = facts->snapshot->hash;
    return;
  }
  FleetPlan plan = plan_fleet(*problem, options_.plan);
  ++metrics_.plans_made;
  metrics_.plan_status = plan.status;
  last_planned_snapshot_ = facts->snapshot->hash;
  if (auto ok = check_fleet_plan(*problem, plan, options_.plan); !ok) {
    error_ = "the plan breaks a rule (a bug in tessera): " + ok.error().message;
    (void)api_.event("Warning", "FleetPlanFailed", error_);
    return;
  }
  // A plan that changes nothing does not overwrite the record of a finished rollout: the
  // ConfigMap (and plan_hash()) keep saying which plan was applied; the pods it evicted may
  // still be waiting for the scheduler.
  if (plan.rollout.empty() && phase_ == ControllerPhase::done) return;
  load_plan(plan_json(*problem, plan));
  // The plan stands on the snapshot and on the mig-parted file's text: a change to either makes it stale.
  snapshot_hash_ = facts->snapshot->hash + "/" + hash_text(facts->mig_text);
  hash_ = hash_text(plan_json_.dump() + "\n" + snapshot_hash_);
  generated_ = json::object();
  for (const auto& cfg : plan.generated.configs) generated_[cfg.name] = plan_json_["mig-parted"]["mig-configs"][cfg.name];
  wave_ = 0;
  wave_started_ = false;
  evicted_ = 0;
  std::string summary = plan_text(*problem, plan);
  bool nothing = waves_.empty();
  const ControllerPhase before = phase_;
  phase_ = nothing ? ControllerPhase::watching : ControllerPhase::proposed;  // as the state records it
  std::string status = nothing ? "nothing to change (" + why + ")"
                               : "proposed (" + why + "): approve with kubectl annotate configmap " + kPlanConfigMap + " " +
                                     kApproveAnnotation + "=" + hash_;
  auto put = api_.put_configmap(kPlanConfigMap,
                                {{"summary", summary},
                                 {"plan.json", plan_json_.dump(2)},
                                 {"hash", hash_},
                                 {"status", status},
                                 {"state", state_json()}},
                                {{kPlanHashAnnotation, hash_}, {kApproveAnnotation, std::nullopt}});
  if (!put) {
    error_ = put.error().message;
    phase_ = before;
    return;
  }
  if (nothing) return;
  (void)api_.event("Normal", "FleetPlanProposed",
                   "plan " + hash_ + " (" + plan.status + "): " + std::to_string(plan.objective.unserved) + " unserved, " +
                       std::to_string(plan.objective.evicted) + " evicted, " + std::to_string(plan.objective.changed_gpus) +
                       " GPUs changed in " + std::to_string(waves_.size()) + " wave(s)" +
                       (options_.auto_approve ? "; approved automatically" : "; waiting for approval"));
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
  if (facts->snapshot->hash + "/" + hash_text(facts->mig_text) != snapshot_hash_) {
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
  evicted_ = 0;
  // Configs tessera generated that no node's label and not this plan names go (the file would
  // only grow, plan after plan); the plan's new ones are added.
  std::set<std::string> keep;
  for (const auto& n : facts->snapshot->nodes)
    if (auto it = n.labels.find(kMigConfigLabel); it != n.labels.end()) keep.insert(it->second);
  for (const auto& [node, cfg] : node_config_) keep.insert(cfg);
  auto pruned = prune_mig_configs(facts->mig_text, keep);
  auto text = pruned ? add_mig_configs(*pruned, generated_) : pruned;
  if (!text) {
    fail_rollout("cannot add the plan's configs to ConfigMap " + options_.mig_configmap + ": " + text.error().message);
    return;
  }
  if (*text != facts->mig_text) {
    if (auto r = api_.put_configmap(options_.mig_configmap, {{options_.mig_configmap_key, *text}}, {}); !r) {
      fail_rollout("cannot update ConfigMap " + options_.mig_configmap + ": " + r.error().message);
      return;
    }
    if (*text != *pruned) {
      phase_ = ControllerPhase::propagating;
      propagated_at_ = now + options_.config_propagation;
      publish_status("applying: the plan's configs added to " + options_.mig_configmap + ", waiting for the nodes to see them");
      return;
    }
  }
  phase_ = ControllerPhase::rolling;
  roll(now);
}

void Controller::roll(Clock::time_point now) {
  if (wave_ >= waves_.size()) {
    phase_ = ControllerPhase::done;
    // The pods still pending may be waiting for the new layout to be served (the ones the plan
    // evicted among them): each gets a whole --pending-after from now before it asks for a plan.
    pending_since_.clear();
    publish_status("done: plan " + hash_ + " applied in " + std::to_string(waves_.size()) + " wave(s)");
    (void)api_.event("Normal", "FleetPlanApplied", "plan " + hash_ + " applied in " + std::to_string(waves_.size()) + " wave(s)");
    return;
  }
  const auto& wave = waves_[wave_];
  if (!wave_started_) {
    // The cluster again, before the wave: its nodes must still be what the plan was made for.
    auto facts = read_facts();
    if (!facts) {
      error_ = facts.error().message;
      return;
    }
    int64_t evictions = 0;
    if (auto why = wave_mismatch(*facts, wave, evictions)) {
      fail_rollout("wave " + std::to_string(wave_ + 1) + " no longer matches the cluster: " + *why +
                       "; it and the later waves are left as they are (plan again to go on)",
                   "FleetPlanStale");
      return;
    }
    evicted_ += evictions;
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
  for (const auto& item : (*list->list)["items"])
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

void Controller::fail_rollout(const std::string& why, const std::string& reason) {
  phase_ = ControllerPhase::failed;
  error_ = why;
  publish_status("failed: " + why);
  (void)api_.event("Warning", reason, "plan " + hash_ + ": " + why);
}

std::optional<std::string> Controller::wave_mismatch(const Facts& facts, const std::vector<std::string>& wave,
                                                     int64_t& evictions) {
  evictions = 0;
  auto problem = build_problem(*facts.snapshot, facts.configs);
  if (!problem) return "the cluster no longer reads as a fleet: " + excerpt(problem.error().message, 300);
  std::map<std::string, const json*> planned;
  for (const auto& n : plan_json_["nodes"]) planned[n.value("name", "")] = &n;
  int64_t planned_evictions = 0;
  for (const auto& name : wave) {
    auto pn = planned.find(name);
    auto node = std::find_if(problem->nodes.begin(), problem->nodes.end(), [&](const Node& n) { return n.name == name; });
    if (pn == planned.end() || node == problem->nodes.end()) return "node " + name + " is no longer a GPU node";
    const json& entry = *pn->second;
    if (!node->accepts_pods())
      return "node " + name + " is " +
             (node->unschedulable ? "cordoned" : !node->ready ? "not Ready" : "running a pod on devices that cannot be told") + " now";
    const json& gpus = entry["gpus"];
    if (!gpus.is_array() || gpus.size() != node->gpus.size() || entry.value("product", "") != node->model->name)
      return "node " + name + " has other GPUs than when the plan was made";
    planned_evictions += entry.contains("evict") ? int64_t(entry["evict"].size()) : 0;
    std::set<int> gone;
    for (size_t k = 0; k < node->gpus.size(); ++k) {
      const Gpu& gpu = problem->gpus[size_t(node->gpus[k])];
      Target t;
      const json& mig = gpus[k]["mig"];
      t.mig = mig.is_object();
      if (t.mig)
        for (auto it = mig.begin(); it != mig.end(); ++it) {
          const GpuInstanceProfile* prof = gpu.model->profile(it.key());
          if (!prof) return "node " + name + ": the plan's " + it.key() + " is no profile of " + gpu.model->name;
          if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 64)
            return "node " + name + ": the plan's count of " + it.key() + " is not a number of instances";
          t.profiles.insert(t.profiles.end(), it->get<size_t>(), uint32_t(prof - gpu.model->profiles.data()));
        }
      std::sort(t.profiles.begin(), t.profiles.end());
      // A GPU planned as it is (a pod there may not go: bare, its budget, its priority; shared
      // devices, the single strategy) may stay; changing it now is refused.
      if (gpu.fixed && t != current_target(gpu))
        return "node " + name + " GPU " + std::to_string(gpu.index) + " is to be kept as it is now (it shares its devices, runs "
               "the single strategy, or holds a pod that may not be evicted), so it is not re-cut";
      GpuOutcome out = apply_target(gpu, t);
      for (size_t i = 0; i < gpu.instances.size(); ++i)
        if (!out.kept[i] && gpu.instances[i].pod >= 0) gone.insert(gpu.instances[i].pod);
    }
    evictions += int64_t(gone.size());
  }
  // Pods that arrived on instances the wave destroys count like the planned ones.
  const int64_t cap = std::max(options_.plan.max_wave_evictions, planned_evictions);
  if (evictions > cap)
    return "it would evict " + std::to_string(evictions) + " pods now (pods arrived on instances it destroys), over " +
           (planned_evictions > options_.plan.max_wave_evictions ? "the " + std::to_string(planned_evictions) + " planned"
                                                                 : "--max-wave-evictions " + std::to_string(options_.plan.max_wave_evictions));
  if (options_.plan.max_evictions && evicted_ + evictions > *options_.plan.max_evictions)
    return "with it the rollout would evict " + std::to_string(evicted_ + evictions) + " pods, over --max-evictions " +
           std::to_string(*options_.plan.max_evictions);
  return std::nullopt;
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

Result<std::string> prune_mig_configs(const std::string& text, const std::set<std::string>& keep) {
  config::Diagnostics diags;
  auto parsed = config::parse_mig_parted(text, "the mig-parted ConfigMap", diags);
  if (!parsed || diags.has_errors()) return fail(Errc::validation, "the mig-parted file does not parse");
  json configs = mig_configs_json(*parsed);
  std::vector<std::string> gone;
  for (auto it = configs.begin(); it != configs.end(); ++it)
    if (it.key().starts_with(kGeneratedPrefix) && !keep.contains(it.key())) gone.push_back(it.key());
  if (gone.empty()) return text;
  for (const auto& name : gone) configs.erase(name);
  return "# Written again by tessera fleet run (" + std::to_string(gone.size()) +
         " generated config(s) no node names removed).\n" + mig_parted_yaml_of({{"version", "v1"}, {"mig-configs", configs}});
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
