// The snapshot reader and the problem builder: Nodes and Pods as the API
// server returns them, to GPUs with their instances and the pods on them.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <string_view>

#include "core/text.hpp"
#include "fleet/fleet.hpp"

namespace tessera::fleet {
namespace {

using json = nlohmann::json;

std::string str_at(const json& object, const char* key) {
  if (!object.is_object()) return {};
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const json& at(const json& object, const char* key) {
  static const json null;
  if (!object.is_object()) return null;
  auto it = object.find(key);
  return it == object.end() ? null : *it;
}

// A resource quantity that must be a whole number ("2", 2).
std::optional<int64_t> whole_quantity(const json& v) {
  if (v.is_number_unsigned()) {  // (also is_number_integer: ask it first)
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return std::nullopt;
  const std::string s = v.get<std::string>();
  int64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return n;
}

// A value for a message: a string quoted as it is, anything else as JSON.
std::string shown(const json& v) { return v.is_string() ? quote(v.get<std::string>()) : v.dump(); }

// A Kubernetes quantity ("500m", "2", "1.5Gi", "1e3"; k8s.io/apimachinery's
// resource.Quantity) in thousandths of its unit, rounded up. nullopt: not a
// quantity, negative, or beyond 2^63 thousandths.
std::optional<int64_t> milli_quantity(const json& v) {
  long double value = 0;
  if (v.is_number()) {
    value = v.get<long double>();
  } else if (v.is_string()) {
    const std::string s = v.get<std::string>();
    size_t digits = 0;
    while (digits < s.size() && (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.' ||
                                 (digits == 0 && s[digits] == '+')))
      ++digits;
    const std::string number = s.substr(s[0] == '+' ? 1 : 0, digits - (s[0] == '+' ? 1 : 0));
    if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1) return std::nullopt;
    double n = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
    const std::string suffix = s.substr(digits);
    static const std::pair<const char*, long double> kSuffixes[] = {
        {"", 1},     {"n", 1e-9L}, {"u", 1e-6L}, {"m", 1e-3L}, {"k", 1e3L},  {"M", 1e6L},
        {"G", 1e9L}, {"T", 1e12L}, {"P", 1e15L}, {"E", 1e18L}, {"Ki", 1024.0L},
        {"Mi", 1048576.0L}, {"Gi", 1073741824.0L}, {"Ti", 1099511627776.0L}, {"Pi", 1125899906842624.0L},
        {"Ei", 1152921504606846976.0L}};
    long double scale = -1;
    for (const auto& [name, factor] : kSuffixes)
      if (suffix == name) scale = factor;
    if (scale < 0 && suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {  // a decimal exponent
      int e = 0;
      auto [eend, eec] = std::from_chars(suffix.data() + 1, suffix.data() + suffix.size(), e);
      if (eec == std::errc() && eend == suffix.data() + suffix.size() && e >= -30 && e <= 30) scale = std::pow(10.0L, e);
    }
    if (scale < 0) return std::nullopt;
    value = (long double)n * scale;
  } else {
    return std::nullopt;
  }
  const long double milli = std::ceil(value * 1000.0L - 1e-9L);
  if (!(milli >= 0) || milli > 9.2e18L) return std::nullopt;
  return static_cast<int64_t>(milli);
}

// The resource a name stands for: "gpu" for nvidia.com/gpu, the profile for
// nvidia.com/mig-<profile> (read back as the device plugin writes it: 1g.10gb.me is 1g.10gb+me);
// shared replicas the sharing config renamed keep their ".shared" (nvidia.com/gpu.shared -> "gpu.shared").
std::optional<std::string> gpu_resource(const std::string& key) {
  if (key == "nvidia.com/gpu") return std::string(kWholeGpu);
  if (key == "nvidia.com/gpu.shared") return std::string(kWholeGpu) + ".shared";
  const bool shared = key.ends_with(".shared");
  auto profile = mig_profile_of_resource(std::string_view(key).substr(0, key.size() - (shared ? 7 : 0)));
  if (!profile) return std::nullopt;
  return *profile + (shared ? ".shared" : "");
}

std::vector<std::string> strings_at(const json& object, const char* key) {
  std::vector<std::string> out;
  const json& v = at(object, key);
  if (v.is_array())
    for (const auto& x : v)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

// A node selector requirement; errors name the field.
std::optional<Requirement> requirement(const json& r, const std::string& where, std::vector<std::string>& errors) {
  static const std::set<std::string> kOps = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};
  Requirement q{str_at(r, "key"), str_at(r, "operator"), strings_at(r, "values")};
  if (!kOps.contains(q.op)) {
    errors.push_back(where + ".operator " + quote(q.op) + " is not In, NotIn, Exists, DoesNotExist, Gt or Lt");
    return std::nullopt;
  }
  return q;
}

// The scheduling rules of a pod's spec the planner reads; the ones it does not model, named.
PodRules pod_rules(const json& spec, const std::string& pod, std::vector<std::string>& errors) {
  PodRules r;
  if (const json& sel = at(spec, "nodeSelector"); sel.is_object())
    for (auto it = sel.begin(); it != sel.end(); ++it)
      if (it->is_string()) r.node_selector[it.key()] = it->get<std::string>();
  const json& affinity = at(spec, "affinity");
  const json& terms = at(at(at(affinity, "nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution"), "nodeSelectorTerms");
  if (terms.is_array())
    for (size_t t = 0; t < terms.size(); ++t) {
      SelectorTerm term;
      for (const char* part : {"matchExpressions", "matchFields"}) {
        const json& list = at(terms[t], part);
        for (size_t k = 0; list.is_array() && k < list.size(); ++k) {
          const std::string where = "Pod " + pod + ": spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                                    ".nodeSelectorTerms[" + std::to_string(t) + "]." + part + "[" + std::to_string(k) + "]";
          if (auto q = requirement(list[k], where, errors)) (std::string(part) == "matchFields" ? term.fields : term.expressions).push_back(*q);
        }
      }
      r.required.push_back(std::move(term));
    }
  if (const json& tols = at(spec, "tolerations"); tols.is_array())
    for (const auto& t : tols) r.tolerations.push_back({str_at(t, "key"), str_at(t, "operator"), str_at(t, "value"), str_at(t, "effect")});
  auto required_terms = [&](const char* kind) {
    const json& v = at(at(affinity, kind), "requiredDuringSchedulingIgnoredDuringExecution");
    return v.is_array() && !v.empty();
  };
  if (required_terms("podAffinity")) r.unmodelled.push_back("pod affinity");
  if (required_terms("podAntiAffinity")) r.unmodelled.push_back("pod anti-affinity");
  if (const json& spread = at(spec, "topologySpreadConstraints"); spread.is_array())
    for (const auto& c : spread)
      if (str_at(c, "whenUnsatisfiable") != "ScheduleAnyway") {
        r.unmodelled.push_back("topology spread");
        break;
      }
  return r;
}

// The facts of a pod's rules, for the snapshot's hash.
std::string rules_facts(const json& spec) {
  json f = json::object();
  for (const char* key : {"nodeSelector", "affinity", "tolerations", "topologySpreadConstraints"})
    if (const json& v = at(spec, key); !v.is_null()) f[key] = v;
  return f.empty() ? "" : f.dump();
}

bool tolerates(const std::vector<Toleration>& tolerations, const Taint& taint) {
  for (const auto& t : tolerations) {
    if (!t.effect.empty() && t.effect != taint.effect) continue;
    if (t.op == "Exists") {
      if (t.key.empty() || t.key == taint.key) return true;
    } else if (t.key == taint.key && t.value == taint.value) {  // Equal, the default
      return true;
    }
  }
  return false;
}

// A number for Gt and Lt (the API accepts integers only).
std::optional<int64_t> integer(const std::string& s) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return n;
}

bool matches(const Requirement& q, const std::optional<std::string>& value) {
  const bool in = value && std::find(q.values.begin(), q.values.end(), *value) != q.values.end();
  if (q.op == "In") return in;
  if (q.op == "NotIn") return !in;
  if (q.op == "Exists") return value.has_value();
  if (q.op == "DoesNotExist") return !value;
  if ((q.op == "Gt" || q.op == "Lt") && value && q.values.size() == 1) {
    auto a = integer(*value), b = integer(q.values[0]);
    return a && b && (q.op == "Gt" ? *a > *b : *a < *b);
  }
  return false;
}

}  // namespace

bool node_admits(const Node& node, const PodRules& rules) {
  if (!node.ready) return false;
  if (node.unschedulable && !tolerates(rules.tolerations, {"node.kubernetes.io/unschedulable", "", "NoSchedule"})) return false;
  for (const auto& t : node.taints)
    if ((t.effect == "NoSchedule" || t.effect == "NoExecute") && !tolerates(rules.tolerations, t)) return false;
  for (const auto& [k, v] : rules.node_selector) {
    auto it = node.labels.find(k);
    if (it == node.labels.end() || it->second != v) return false;
  }
  if (rules.required.empty()) return true;
  for (const auto& term : rules.required) {
    if (term.expressions.empty() && term.fields.empty()) continue;  // an empty term matches nothing
    bool all = true;
    for (const auto& q : term.expressions) {
      auto it = node.labels.find(q.key);
      all = all && matches(q, it == node.labels.end() ? std::nullopt : std::optional<std::string>(it->second));
    }
    for (const auto& q : term.fields) all = all && q.key == "metadata.name" && matches(q, node.name);
    if (all) return true;
  }
  return false;
}

bool fits(const Amounts& room, const Amounts& requests, std::string* why) {
  for (const auto& [r, q] : requests)
    if (auto it = room.find(r); it != room.end() && it->second < q) {
      if (why) *why = r;
      return false;
    }
  return true;
}

int Problem::priority_level(int pod) const {
  auto it = std::find(priorities.begin(), priorities.end(), pods[size_t(pod)].priority);
  return it == priorities.end() ? -1 : int(it - priorities.begin());
}

bool Problem::allows(int pod, int node) const {
  const Pod& x = pods[size_t(pod)];
  if (!x.constrained) return nodes[size_t(node)].accepts_pods();
  return x.allowed[size_t(node)];
}

std::string hash_text(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

bool SnapBudget::selects(const SnapPod& pod) const {
  if (selects_nothing || !pod.id.starts_with(ns + "/")) return false;
  for (const auto& [k, v] : match_labels) {
    auto it = pod.labels.find(k);
    if (it == pod.labels.end() || it->second != v) return false;
  }
  for (const auto& q : match_expressions) {
    auto it = pod.labels.find(q.key);
    if (!matches(q, it == pod.labels.end() ? std::nullopt : std::optional<std::string>(it->second))) return false;
  }
  return true;
}

namespace {

// The GPU devices a ResourceClaim (resource.k8s.io/v1) holds: its status.allocation's results of
// the GPU DRA driver, each with the node its allocation's nodeSelector names (matchFields
// metadata.name), else its pool (a node-local driver names its pool after its node). A claim not
// allocated holds nothing; one whose node cannot be told is said in `warnings`.
std::vector<std::pair<std::string, std::string>> claimed_devices(const json& item, const std::string& id,
                                                                 const std::vector<std::string>& drivers,
                                                                 std::vector<std::string>& warnings) {
  std::vector<std::pair<std::string, std::string>> out;
  const json& alloc = at(at(item, "status"), "allocation");
  if (!alloc.is_object()) return out;
  std::string node;
  if (const json& terms = at(at(alloc, "nodeSelector"), "nodeSelectorTerms"); terms.is_array())
    for (const auto& t : terms)
      if (const json& fields = at(t, "matchFields"); fields.is_array())
        for (const auto& f : fields)
          if (str_at(f, "key") == "metadata.name" && str_at(f, "operator") == "In" && strings_at(f, "values").size() == 1)
            node = strings_at(f, "values").front();
  const json& results = at(at(alloc, "devices"), "results");
  if (!results.is_array()) {
    warnings.push_back("ResourceClaim " + id + ": status.allocation.devices.results is not a list; the GPUs it may hold are not known");
    return out;
  }
  for (const auto& r : results) {
    const std::string driver = str_at(r, "driver");
    if (std::find(drivers.begin(), drivers.end(), driver) == drivers.end()) continue;
    const std::string where = node.empty() ? str_at(r, "pool") : node;
    if (where.empty()) {
      warnings.push_back("ResourceClaim " + id + ": device " + quote(str_at(r, "device")) +
                         " of " + driver + " names neither a node nor a pool; the node it holds is not known");
      continue;
    }
    out.emplace_back(where, quote(str_at(r, "device")) + " of " + driver);
  }
  return out;
}

// A PodDisruptionBudget's fields (policy/v1): its selector, its budget as
// written, and status.disruptionsAllowed. What cannot be read is said in
// `why`; build_problem then keeps every pod of its namespace from eviction.
SnapBudget read_budget(const json& item, const std::string& ns, const std::string& name, std::string& why) {
  SnapBudget b;
  b.id = ns + "/" + name;
  b.ns = ns;
  const json& spec = at(item, "spec");
  const json& sel = at(spec, "selector");
  if (sel.is_null()) {
    b.selects_nothing = true;  // policy/v1: a null selector selects no pod
  } else if (!sel.is_object()) {
    why = "spec.selector is not an object";
  } else {
    if (const json& ml = at(sel, "matchLabels"); ml.is_object()) {
      for (auto it = ml.begin(); it != ml.end(); ++it)
        if (it->is_string()) b.match_labels[it.key()] = it->get<std::string>();
        else why = "spec.selector.matchLabels." + it.key() + " is not a string";
    }
    if (const json& me = at(sel, "matchExpressions"); me.is_array())
      for (size_t k = 0; k < me.size(); ++k) {
        Requirement q{str_at(me[k], "key"), str_at(me[k], "operator"), strings_at(me[k], "values")};
        if (q.op != "In" && q.op != "NotIn" && q.op != "Exists" && q.op != "DoesNotExist")
          why = "spec.selector.matchExpressions[" + std::to_string(k) + "].operator " + quote(q.op) +
                " is not In, NotIn, Exists or DoesNotExist";
        b.match_expressions.push_back(std::move(q));
      }
  }
  for (const char* field : {"minAvailable", "maxUnavailable"}) {
    const json& v = at(spec, field);
    if (v.is_null()) continue;
    std::string text;
    if (v.is_number_integer() && v.get<int64_t>() >= 0) text = std::to_string(v.get<int64_t>());
    else if (v.is_string() && v.get<std::string>().ends_with('%') && integer(v.get<std::string>().substr(0, v.get<std::string>().size() - 1)))
      text = v.get<std::string>();
    else why = std::string("spec.") + field + " is neither a count nor a percentage";
    (std::string(field) == "minAvailable" ? b.min_available : b.max_unavailable) = text;
  }
  if (const json& allowed = at(at(item, "status"), "disruptionsAllowed"); allowed.is_number_integer())
    b.allowed = std::max<int64_t>(0, allowed.get<int64_t>());
  return b;
}

// A count or a percentage of `of`, rounded up (as the disruption controller
// scales minAvailable and maxUnavailable).
int64_t scaled(const std::string& v, int64_t of) {
  if (v.ends_with('%')) return (*integer(v.substr(0, v.size() - 1)) * of + 99) / 100;
  return *integer(v);
}

}  // namespace

namespace {

// Removes from `value` the fields snapshot_field_wanted refuses; `path` is where `value` sits.
void drop_unwanted(json& value, std::vector<std::string>& path) {
  if (value.is_array()) {
    for (auto& v : value) drop_unwanted(v, path);
    return;
  }
  if (!value.is_object()) return;
  for (auto it = value.begin(); it != value.end();) {
    path.push_back(it.key());
    if (snapshot_field_wanted(path)) {
      drop_unwanted(it.value(), path);
      ++it;
    } else {
      it = value.erase(it);
    }
    path.pop_back();
  }
}

// Whether one of a pod's containers or init containers asks for an nvidia.com/ resource.
bool asks_for_gpu(const json& pod) {
  for (const char* list : {"containers", "initContainers"}) {
    const json& containers = at(at(pod, "spec"), list);
    for (size_t c = 0; containers.is_array() && c < containers.size(); ++c)
      for (const char* part : {"requests", "limits"})
        if (const json& m = at(at(containers[c], "resources"), part); m.is_object())
          for (auto it = m.begin(); it != m.end(); ++it)
            if (it.key().starts_with("nvidia.com/")) return true;
  }
  return false;
}

// The effective request of each resource, as the scheduler reads it: the app containers' sum
// plus the sidecars' (init containers with restartPolicy Always, which run beside them), or an
// ordinary init container's own (plus the sidecars started before it) where that is larger.
// `own` gives one container's requests.
template <class Own>
std::map<std::string, int64_t> effective_requests(const json& spec, Own&& own) {
  std::map<std::string, int64_t> asks, sidecars, init_peak;
  if (const json& containers = at(spec, "containers"); containers.is_array())
    for (const auto& c : containers)
      for (const auto& [r, q] : own(c)) asks[r] += q;
  if (const json& inits = at(spec, "initContainers"); inits.is_array())
    for (const auto& c : inits) {
      const auto mine = own(c);
      if (str_at(c, "restartPolicy") == "Always") {
        for (const auto& [r, q] : mine) {
          asks[r] += q;
          sidecars[r] += q;
        }
      } else {
        for (const auto& [r, q] : mine) init_peak[r] = std::max(init_peak[r], q + sidecars[r]);
      }
    }
  for (const auto& [r, q] : init_peak) asks[r] = std::max(asks[r], q);
  return asks;
}

}  // namespace

bool slim_snapshot_item(json& item) {
  if (!item.is_object()) return true;  // parse_snapshot names what is wrong with it
  const std::string kind = str_at(item, "kind");
  if (kind != "Pod" && kind != "Node") return true;
  // A pod that asks for no GPU matters only for what it takes of the node it runs on.
  if (kind == "Pod" && !asks_for_gpu(item)) {
    const std::string phase = str_at(at(item, "status"), "phase");
    if (str_at(at(item, "spec"), "nodeName").empty() || phase == "Succeeded" || phase == "Failed") return false;
  }
  std::vector<std::string> path;
  drop_unwanted(item, path);
  return true;
}

bool snapshot_field_wanted(std::span<const std::string> path) {
  auto one_of = [](const std::string& key, std::initializer_list<std::string_view> keys) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  if (path.empty()) return true;
  const std::string& top = path[0];
  if (path.size() == 1) return one_of(top, {"kind", "apiVersion", "metadata", "spec", "status"});
  const std::string& field = path[1];
  if (top == "metadata") {
    if (path.size() == 2)
      return one_of(field, {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "ownerReferences", "labels",
                            "annotations"});
    return field != "annotations" || path.size() > 3 || path[2] == kLayoutAnnotation;
  }
  if (top == "spec") {
    if (path.size() == 2)
      return one_of(field, {"nodeName", "priority", "nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "containers",
                            "initContainers", "overhead", "unschedulable", "taints"});
    if (field != "containers" && field != "initContainers") return true;
    if (path.size() == 3) return one_of(path[2], {"name", "resources", "restartPolicy"});
    if (path[2] != "resources") return true;
    if (path.size() == 4) return one_of(path[3], {"requests", "limits"});
    // GPUs, and what NodeResourcesFit fits besides them.
    return path.size() > 5 || path[4].starts_with("nvidia.com/") || one_of(path[4], {"cpu", "memory", "ephemeral-storage"});
  }
  if (top == "status") {
    if (path.size() == 2) return one_of(field, {"phase", "conditions", "allocatable"});
    if (field == "allocatable")
      return path[2].starts_with("nvidia.com/") || one_of(path[2], {"cpu", "memory", "ephemeral-storage", "pods"});
    return field != "conditions" || path.size() > 3 || one_of(path[2], {"type", "status"});
  }
  return true;
}

Result<Snapshot> parse_snapshot_text(const std::string& text, const std::string& source,
                                     const std::vector<std::string>& dra_drivers) {
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded())
    return fail(Errc::parse, source + ": not JSON (expected the output of `kubectl get nodes,pods -A -o json`)");
  return parse_snapshot(doc, source, dra_drivers);
}

Result<Snapshot> parse_snapshot(const json& list, const std::string& source, const std::vector<std::string>& dra_drivers) {
  const std::vector<std::string> gpu_drivers = dra_drivers.empty() ? std::vector<std::string>{kGpuDraDriver} : dra_drivers;
  std::string kind = str_at(list, "kind");
  if (!list.is_object() || (kind != "List" && kind != "NodeList" && kind != "PodList") || !at(list, "items").is_array())
    return fail(Errc::parse, source + ": not a Kubernetes List (kind " + (kind.empty() ? "missing" : quote(kind)) +
                                 "; expected kind List with items, as `kubectl get nodes,pods -A -o json` prints)");
  Snapshot snap;
  std::vector<std::string> errors;
  std::string facts;
  std::map<std::string, std::vector<std::string>> claims;  // node -> its DRA-held GPU devices
  size_t index = 0;
  for (const auto& item : list["items"]) {
    std::string where = source + ": items[" + std::to_string(index++) + "]";
    std::string item_kind = str_at(item, "kind");
    if (item_kind.empty() && kind == "NodeList") item_kind = "Node";
    if (item_kind.empty() && kind == "PodList") item_kind = "Pod";
    const json& meta = at(item, "metadata");
    std::string name = str_at(meta, "name");
    if (item_kind != "Node" && item_kind != "Pod" && item_kind != "PodDisruptionBudget" && item_kind != "ResourceClaim") {
      errors.push_back(where + ": kind " + quote(item_kind) + " is neither Node, Pod, PodDisruptionBudget nor ResourceClaim");
      continue;
    }
    if (name.empty()) {
      errors.push_back(where + ": a " + item_kind + " without metadata.name");
      continue;
    }
    if (item_kind == "ResourceClaim") {
      const std::string ns = str_at(meta, "namespace").empty() ? std::string("default") : str_at(meta, "namespace");
      for (auto& [node, device] : claimed_devices(item, ns + "/" + name, gpu_drivers, snap.warnings))
        claims[node].push_back("ResourceClaim " + ns + "/" + name + " holds " + device);
      continue;
    }
    if (item_kind == "PodDisruptionBudget") {
      const std::string ns = str_at(meta, "namespace").empty() ? std::string("default") : str_at(meta, "namespace");
      std::string why;
      SnapBudget b = read_budget(item, ns, name, why);
      if (!why.empty()) {
        // Which pods it guards cannot be told: it guards its whole namespace, with nothing to spare.
        SnapBudget whole;
        whole.id = b.id;
        whole.ns = ns;
        whole.allowed = 0;
        b = std::move(whole);
        snap.warnings.push_back("PodDisruptionBudget " + b.id + ": " + why +
                                       "; every pod of namespace " + ns + " is kept from eviction");
      }
      facts += "B|" + b.id + "|" + (b.selects_nothing ? "none" : "") + "|" +
               (b.allowed ? std::to_string(*b.allowed) : "-") + "|" + b.min_available.value_or("-") + "|" +
               b.max_unavailable.value_or("-");
      for (const auto& [k, v] : b.match_labels) facts += "|" + k + "=" + v;
      for (const auto& q : b.match_expressions) facts += "|" + q.key + " " + q.op + " " + join(q.values);
      facts += "\n";
      snap.budgets.push_back(std::move(b));
      continue;
    }
    if (item_kind == "Node") {
      SnapNode n;
      n.name = name;
      n.uid = str_at(meta, "uid");
      if (const json& labels = at(meta, "labels"); labels.is_object())
        for (auto it = labels.begin(); it != labels.end(); ++it)
          if (it->is_string()) n.labels[it.key()] = it->get<std::string>();
      if (const json& ann = at(meta, "annotations"); ann.is_object())
        if (auto it = ann.find(kLayoutAnnotation); it != ann.end() && it->is_string()) n.layout_annotation = it->get<std::string>();
      const json& spec = at(item, "spec");
      n.unschedulable = at(spec, "unschedulable").is_boolean() && at(spec, "unschedulable").get<bool>();
      if (const json& conds = at(at(item, "status"), "conditions"); conds.is_array())
        for (const auto& c : conds)
          if (str_at(c, "type") == "Ready") n.ready = str_at(c, "status") == "True";
      if (const json& taints = at(spec, "taints"); taints.is_array())
        for (const auto& t : taints) n.taints.push_back({str_at(t, "key"), str_at(t, "value"), str_at(t, "effect")});
      // What the scheduler fits pods into (NodeResourcesFit): status.allocatable, not capacity.
      if (const json& alloc = at(at(item, "status"), "allocatable"); alloc.is_object()) {
        n.devices.emplace();
        for (auto it = alloc.begin(); it != alloc.end(); ++it) {
          if (!it.key().starts_with("nvidia.com/")) continue;
          auto q = milli_quantity(*it);
          const bool whole = q && *q >= 0 && *q % 1000 == 0;
          (*n.devices)[it.key()] = whole ? *q / 1000 : -1;  // -1: unreadable, not compared
          if (!whole)
            snap.warnings.push_back("Node " + name + ": status.allocatable." + it.key() + " " + shown(*it) +
                                    " is not a whole number of devices; it is not compared with the node's layout");
        }
        for (const char* r : kFitResources)
          if (alloc.contains(r)) {
            if (auto q = milli_quantity(alloc[r])) n.allocatable[r] = *q;
            else snap.warnings.push_back("Node " + name + ": status.allocatable." + r + " " + shown(alloc[r]) +
                                         " is not a quantity; " + r + " is not fitted there");
          }
      }
      // Everything the plan depends on: every label (selectors read any), readiness, cordon, taints.
      facts += "N|" + n.name + "|" + n.layout_annotation.value_or("") + "|" + (n.unschedulable ? "cordoned" : "") + "|" +
               (n.ready ? "ready" : "not-ready");
      // Every label but GFD's timestamp, which it rewrites every pass (a plan must not go stale by it).
      for (const auto& [k, v] : n.labels)
        if (k != "nvidia.com/gfd.timestamp") facts += "|" + k + "=" + v;
      for (const auto& t : n.taints) facts += "|taint " + t.key + "=" + t.value + ":" + t.effect;
      for (const auto& [r, q] : n.allocatable) facts += "|allocatable " + r + "=" + std::to_string(q);
      if (n.devices)
        for (const auto& [r, q] : *n.devices) facts += "|allocatable " + r + "=" + std::to_string(q);
      facts += "\n";
      snap.nodes.push_back(std::move(n));
      continue;
    }
    SnapPod p;
    std::string ns = str_at(meta, "namespace");
    p.id = (ns.empty() ? std::string("default") : ns) + "/" + name;
    p.node = str_at(at(item, "spec"), "nodeName");
    p.phase = str_at(at(item, "status"), "phase");
    p.created = str_at(meta, "creationTimestamp");
    // spec.priority: what admission resolved priorityClassName to (0 without one).
    if (const json& pr = at(at(item, "spec"), "priority"); pr.is_number_integer()) p.priority = pr.get<int64_t>();
    // A finished pod holds nothing and asks for nothing, whatever it says;
    // one deleted before it was scheduled never will be (kube-scheduler
    // skips pods with a deletionTimestamp). One deleted while it runs holds
    // its devices until it is gone.
    if (p.phase == "Succeeded" || p.phase == "Failed") continue;
    if (!str_at(meta, "deletionTimestamp").empty() && p.node.empty()) continue;
    std::string unreadable;
    auto container_asks = [&](const json& c) {
      std::map<std::string, int64_t> mine;
      const json& res = at(c, "resources");
      for (const char* part : {"requests", "limits"}) {
        const json& m = at(res, part);
        if (!m.is_object()) continue;
        for (auto it = m.begin(); it != m.end(); ++it) {
          auto r = gpu_resource(it.key());
          if (!r) continue;
          auto q = whole_quantity(*it);
          if (!q || *q < 0 || *q > 1024) {
            if (unreadable.empty()) unreadable = it.key() + " " + quote(it->dump()) + " is not a whole number of devices";
            continue;
          }
          // Extended resources: requests equal limits; either alone means both.
          mine[*r] = std::max(mine[*r], *q);
        }
      }
      return mine;
    };
    std::map<std::string, int64_t> asks = effective_requests(at(item, "spec"), container_asks);
    // What it takes of its node besides GPUs (NodeResourcesFit): the same arithmetic over cpu,
    // memory and ephemeral-storage (a container's limit where it gives no request, as the API
    // server defaults it), plus spec.overhead, and one pod.
    std::string bad_quantity;
    auto container_fit = [&](const json& c) {
      Amounts mine;
      const json& res = at(c, "resources");
      for (const char* r : {"cpu", "memory", "ephemeral-storage"}) {
        const json* q = nullptr;
        for (const char* part : {"limits", "requests"})  // a request, where given, wins
          if (const json& m = at(res, part); m.is_object() && m.contains(r)) q = &m.at(r);
        if (!q) continue;
        if (auto v = milli_quantity(*q)) mine[r] = *v;
        else if (bad_quantity.empty()) bad_quantity = std::string(r) + " " + shown(*q) + " is not a quantity";
      }
      return mine;
    };
    Amounts fit = effective_requests(at(item, "spec"), container_fit);
    if (const json& overhead = at(at(item, "spec"), "overhead"); overhead.is_object())
      for (const char* r : {"cpu", "memory", "ephemeral-storage"})
        if (overhead.contains(r)) {
          if (auto v = milli_quantity(overhead.at(r))) fit[r] += *v;
          else if (bad_quantity.empty()) bad_quantity = std::string("spec.overhead.") + r + " " + shown(overhead.at(r)) + " is not a quantity";
        }
    fit["pods"] = 1000;
    std::erase_if(fit, [](const auto& kv) { return kv.second == 0; });
    std::erase_if(asks, [](const auto& kv) { return kv.second == 0; });
    if (asks.empty() && unreadable.empty()) {
      // No GPU: only what it takes of its node counts.
      if (!p.node.empty()) {
        if (!bad_quantity.empty())
          snap.warnings.push_back("Pod " + p.id + ": " + bad_quantity + "; what it takes of node " + p.node + " is not counted");
        else
          for (const auto& [r, q] : fit) snap.other_use[p.node][r] += q;
      }
      continue;
    }
    if (unreadable.empty() && !bad_quantity.empty()) unreadable = bad_quantity;
    p.requests = std::move(fit);
    if (asks.size() > 1) {
      std::vector<std::string> names;
      for (const auto& [r, q] : asks) names.push_back(resource_key(r));
      unreadable = "asks for " + std::to_string(names.size()) + " different GPU resources (" + join(names) +
                   "); the planner places a pod that asks for one MIG profile or whole GPUs";
    }
    // Scheduling rules that cannot be read (an operator the API would refuse)
    // stop this pod too, not the fleet.
    std::vector<std::string> rule_errors;
    PodRules rules = pod_rules(at(item, "spec"), p.id, rule_errors);
    if (unreadable.empty() && !rule_errors.empty()) {
      unreadable = rule_errors.front();
      if (const std::string own = "Pod " + p.id + ": "; unreadable.starts_with(own)) unreadable.erase(0, own.size());
    }
    if (!unreadable.empty()) {
      // One pod stops only itself (build_problem: left out, or its node kept as it is).
      p.unreadable = unreadable;
      facts += "P|" + p.id + "|" + p.node + "|" + p.phase + "|unreadable|" + unreadable + "\n";
      snap.pods.push_back(std::move(p));
      continue;
    }
    p.resource = asks.begin()->first;
    p.count = static_cast<uint32_t>(asks.begin()->second);
    p.bare = !at(meta, "ownerReferences").is_array() || at(meta, "ownerReferences").empty();
    if (const json& labels = at(meta, "labels"); labels.is_object())
      for (auto it = labels.begin(); it != labels.end(); ++it)
        if (it->is_string()) p.labels[it.key()] = it->get<std::string>();
    p.rules = std::move(rules);
    facts += "P|" + p.id + "|" + p.node + "|" + p.phase + "|" + p.resource + "|" + std::to_string(p.count) + "|" +
             (p.bare ? "bare|" : "") + (p.priority ? "priority " + std::to_string(p.priority) + "|" : "") +
             rules_facts(at(item, "spec"));
    for (const auto& [r, q] : p.requests) facts += "|request " + r + "=" + std::to_string(q);
    for (const auto& [k, v] : p.labels) facts += "|label " + k + "=" + v;  // what budgets select
    facts += "\n";
    snap.pods.push_back(std::move(p));
  }
  if (!errors.empty()) {
    if (errors.size() > 20) {
      size_t more = errors.size() - 20;
      errors.resize(20);
      errors.push_back("... and " + std::to_string(more) + " more");
    }
    return fail(Errc::validation, join(errors, "\n"));
  }
  for (auto& n : snap.nodes)
    if (auto it = claims.find(n.name); it != claims.end()) {
      n.dra_devices = std::move(it->second);
      std::sort(n.dra_devices.begin(), n.dra_devices.end());
      for (const auto& d : n.dra_devices) facts += "C|" + n.name + "|" + d + "\n";
    }
  std::sort(snap.nodes.begin(), snap.nodes.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::sort(snap.pods.begin(), snap.pods.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  // The hash does not depend on the order of the items.
  std::vector<std::string> lines;
  for (size_t s = 0, e; s < facts.size(); s = e + 1) {
    e = facts.find('\n', s);
    lines.push_back(facts.substr(s, e - s));
  }
  std::sort(lines.begin(), lines.end());
  snap.hash = hash_text(join(lines, "\n"));
  return snap;
}

const GpuModel* find_product(const Catalog& catalog, const std::string& label) {
  std::string name = label;
  // GFD's suffixes: "-MIG-<profile>" under the single strategy, "-SHARED" where devices are shared
  // (time-slicing or MPS replicas; tessera's own labeller writes it too).
  if (name.ends_with("-SHARED")) name.resize(name.size() - 7);
  if (auto mig = name.find("-MIG-"); mig != std::string::npos) name = name.substr(0, mig);
  auto lower = [](std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string want = lower(name);
  // GFD writes the NVML name with its spaces as dashes ("NVIDIA A100 80GB PCIe" -> "NVIDIA-A100-80GB-PCIe");
  // boards of one MIG geometry are one model, their names among its aliases.
  auto dashed = [&](std::string s) {
    std::replace(s.begin(), s.end(), ' ', '-');
    return lower(s);
  };
  for (const auto& m : catalog.models()) {
    if (dashed(m.nvml_name) == want) return &m;
    for (const auto& a : m.aliases)
      if (dashed(a) == want || "nvidia-" + dashed(a) == want) return &m;
  }
  if (const auto* m = catalog.find(name)) return m;
  if (want.starts_with("nvidia-"))
    if (const auto* m = catalog.find(name.substr(7))) return m;
  return nullptr;
}

int Problem::resource_index(const std::string& name) const {
  auto it = std::find(resources.begin(), resources.end(), name);
  return it == resources.end() ? -1 : static_cast<int>(it - resources.begin());
}

std::string instance_resource(const Gpu& gpu, const Instance& inst, bool mig) {
  const std::string base = !mig || gpu.single ? std::string(kWholeGpu) : gpu.model->profiles[inst.profile].name;
  return gpu.renamed.contains(base) ? base + ".shared" : base;
}

std::string instance_resource(const Gpu& gpu, const Instance& inst) { return instance_resource(gpu, inst, gpu.mig); }

std::string resource_key(const std::string& resource) {
  if (resource.starts_with(kWholeGpu) && (resource.size() == 3 || resource.substr(3) == ".shared")) return "nvidia.com/" + resource;
  return mig_resource_name(resource);
}

bool node_offers(const Problem& p, int node, const std::string& resource) {
  for (int g : p.nodes[size_t(node)].gpus) {
    const Gpu& gpu = p.gpus[size_t(g)];
    if (gpu.fixed) {
      for (const auto& i : gpu.instances)
        if (instance_resource(gpu, i) == resource) return true;
    } else if (resource == kWholeGpu || gpu.model->profile(resource) != nullptr) {
      return true;
    }
  }
  return false;
}

namespace {

// The GPU's layout as the config entry says, placed as the agent would create it from nothing.
Result<Gpu> gpu_from_config(const GpuModel& model, const config::MigConfig& config, uint32_t index) {
  Gpu g;
  g.index = index;
  g.model = &model;
  for (const auto& entry : config.entries) {
    if (!entry.devices.selects(index)) continue;
    if (!config::filter_selects(entry, model.pci_device_id, 0, &model)) continue;
    g.mig = entry.mig_enabled;
    if (!g.mig) break;
    ProfileCounts counts;
    for (const auto& d : entry.mig_devices) counts[d.canonical.empty() ? d.profile : d.canonical] += d.count;
    auto placed = place_counts(model, counts);
    if (!placed) return fail(placed.error().code, "config " + quote(config.name) + ": " + placed.error().message);
    for (const auto& p : *placed) g.instances.push_back({p.profile, p.start, -1});
    return g;
  }
  if (!g.mig) g.instances.push_back({0, 0, -1});
  return g;
}

}  // namespace

Result<Problem> build_problem(const Snapshot& snap, const config::MigPartedConfig& configs, const Catalog& catalog) {
  Problem p;
  p.configs = &configs;
  p.snapshot_hash = snap.hash;
  p.resources.push_back(kWholeGpu);
  std::map<std::string, int> node_index;
  // Annotated pod -> (gpu, instance) pairs.
  std::map<std::string, std::vector<std::pair<int, int>>> annotated;
  for (const auto& sn : snap.nodes) {
    auto product = sn.labels.find(kProductLabel);
    if (product == sn.labels.end()) continue;  // not a GPU node
    // One node whose labels cannot be read stops only itself (never the
    // fleet): it is left out, so nothing on it changes and its pods are not planned.
    auto leave_out = [&](const std::string& why) {
      p.warnings.push_back("Node " + sn.name + ": " + why + "; the node is left out of the plan (nothing on it changes, "
                           "its pods are not planned)");
    };
    Node n;
    n.name = sn.name;
    n.uid = sn.uid;
    n.labels = sn.labels;
    n.taints = sn.taints;
    n.unschedulable = sn.unschedulable;
    n.ready = sn.ready;
    // Its room: allocatable less what every pod that runs there asks (GPU pods, unreadable ones too).
    n.room = sn.allocatable;
    if (!n.room.empty()) {
      auto take = [&](const Amounts& used) {
        for (const auto& [r, q] : used)
          if (auto it = n.room.find(r); it != n.room.end()) it->second -= q;
      };
      if (auto other = snap.other_use.find(sn.name); other != snap.other_use.end()) take(other->second);
      for (const auto& sp : snap.pods)
        if (sp.node == sn.name) take(sp.requests);
    }
    const std::string& product_label = product->second;
    n.model = find_product(catalog, product_label);
    // GFD's labels for the single MIG strategy ("...-MIG-<profile>", mig.strategy=single) and
    // for shared replicas (gpu.replicas; "-SHARED" on the product when the resources keep their names).
    std::string single_profile;
    {
      std::string name = product_label;
      if (name.ends_with("-SHARED")) name.resize(name.size() - 7);
      if (auto mig = name.find("-MIG-"); mig != std::string::npos) single_profile = name.substr(mig + 5);
    }
    auto strategy = sn.labels.find(kMigStrategyLabel);
    const bool single = !single_profile.empty() || (strategy != sn.labels.end() && strategy->second == "single");
    // Replicas per device: gpu.replicas for whole GPUs (and, under the single strategy, its MIG
    // devices), mig-<profile>.replicas for a MIG profile under the mixed strategy (GFD's labels);
    // 0 (what a labeller writes for a resource with no devices) and 1 mean not shared.
    std::map<std::string, uint32_t> replicas_of;  // "" for gpu.replicas, else the profile
    bool bad_replicas = false;
    for (const auto& [key, value] : sn.labels) {
      std::string which;
      if (key == kReplicasLabel) which = "";
      else if (auto profile = key.ends_with(".replicas") ? mig_profile_of_resource(std::string_view(key).substr(0, key.size() - 9))
                                                          : std::nullopt)
        which = *profile;  // mig-1g.10gb.me.replicas is 1g.10gb+me's
      else continue;
      uint32_t r = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), r);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size() || r > 1024) {
        leave_out(key + "=" + quote(value) + " is not a replica count from 0 to 1024");
        bad_replicas = true;
        break;
      }
      replicas_of[which] = std::max<uint32_t>(1, r);
    }
    if (bad_replicas) continue;
    uint32_t replicas = 1;  // the most of any device
    for (const auto& [which, r] : replicas_of) replicas = std::max(replicas, r);
    // Renamed (NVIDIA's renameByDefault) unless GFD marks the product -SHARED: only the shared
    // resources get ".shared"; the others keep their names.
    std::set<std::string> renamed;
    if (!product_label.ends_with("-SHARED"))
      for (const auto& [which, r] : replicas_of)
        if (r > 1) renamed.insert(which.empty() ? std::string(kWholeGpu) : which);
    const GpuInstanceProfile* single_prof = single && n.model ? n.model->profile(single_profile) : nullptr;
    bool uncatalogued = !n.model;
    if (!uncatalogued && single && !single_prof) {
      p.warnings.push_back("Node " + sn.name + ": " + kProductLabel + "=" + quote(product_label) + " under the single MIG strategy "
                           "names no profile of " + n.model->name + ": its devices are planned as whole GPUs that never change");
      uncatalogued = true;
    } else if (uncatalogued) {
      std::vector<std::string> names;
      for (const auto& m : catalog.models()) {
        std::string gfd = m.nvml_name;
        std::replace(gfd.begin(), gfd.end(), ' ', '-');
        names.push_back(gfd);
      }
      p.warnings.push_back("Node " + sn.name + ": " + kProductLabel + "=" + quote(product_label) +
                           " is not a MIG GPU in the catalog (nearest: " + join(nearest(product_label, names, 3)) +
                           "): its GPUs are planned as whole GPUs that never change");
    }
    if (uncatalogued) {
      // Not a MIG GPU the catalog knows (an L4, a part not in it yet): whole GPUs, never changed.
      const GpuModel* known = nullptr;
      for (const auto& m : p.fixed_models)
        if (m->nvml_name == product_label) known = m.get();
      if (!known) {
        auto m = std::make_shared<GpuModel>();
        m->name = m->nvml_name = product_label;
        p.fixed_models.push_back(m);
        known = m.get();
      }
      n.model = known;
    }
    // Planned as it is: see Gpu::fixed.
    bool fixed = uncatalogued || single_prof || replicas > 1;
    uint32_t count = 0;
    // Under the single strategy gpu.count counts MIG devices (up to 7 per GPU).
    const uint32_t max_count = single ? 512 : 64;
    if (auto c = sn.labels.find(kCountLabel); c != sn.labels.end()) {
      auto [end, ec] = std::from_chars(c->second.data(), c->second.data() + c->second.size(), count);
      if (ec != std::errc() || end != c->second.data() + c->second.size() || count == 0 || count > max_count) {
        leave_out(std::string(kCountLabel) + "=" + quote(c->second) + " is not a GPU count from 1 to " + std::to_string(max_count));
        continue;
      }
    } else {
      leave_out(std::string("has ") + kProductLabel + " but no " + kCountLabel + " label");
      continue;
    }
    // Nodes that serve no MIG device whatever their GPUs could do: GFD's
    // mig.capable=false, or the plugin's mig.strategy=none (whole GPUs only).
    // Their GPUs are whole and never cut, whatever mig.config says.
    const auto capable = sn.labels.find(kMigCapableLabel);
    const bool no_mig = (capable != sn.labels.end() && capable->second == "false") ||
                        (strategy != sn.labels.end() && strategy->second == "none");
    if (no_mig && !uncatalogued && sn.labels.contains(kMigConfigLabel))
      p.warnings.push_back("Node " + sn.name + ": " +
                           (capable != sn.labels.end() && capable->second == "false" ? std::string(kMigCapableLabel) + "=false"
                                                                                     : std::string(kMigStrategyLabel) + "=none") +
                           ": its GPUs are planned as whole GPUs that never change, whatever " + kMigConfigLabel + " says");
    fixed = fixed || no_mig;
    const config::MigConfig* config = nullptr;
    if (auto c = sn.labels.find(kMigConfigLabel); c != sn.labels.end() && (uncatalogued || no_mig)) {
      n.config = c->second;  // kept as it is: nothing on the node changes
    } else if (c != sn.labels.end()) {
      n.config = c->second;
      config = configs.find(c->second);
      if (!config && fixed) {
        p.warnings.push_back("Node " + sn.name + ": " + kMigConfigLabel + "=" + quote(c->second) + " is not a config in " +
                             configs.file + "; the node is planned as it is, from its GFD labels");
      } else if (!config) {
        std::vector<std::string> names;
        for (const auto& cfg : configs.configs) names.push_back(cfg.name);
        leave_out(std::string(kMigConfigLabel) + "=" + quote(c->second) + " is not a config in " + configs.file +
                  (names.empty() ? "" : " (nearest: " + join(nearest(c->second, names, 3)) + ")"));
        continue;
      }
    }
    // The single strategy: gpu.count MIG devices of one profile, so many per GPU as the config
    // gives (or as many as fit), hence count / per_gpu GPUs.
    uint32_t physical = count, per_gpu = 0;
    if (single_prof) {
      if (config)
        for (const auto& entry : config->entries) {
          if (!entry.devices.selects(0) || !config::filter_selects(entry, n.model->pci_device_id, 0, n.model)) continue;
          ProfileCounts counts;
          for (const auto& d : entry.mig_devices)
            if (d.count) counts[d.canonical.empty() ? d.profile : d.canonical] += d.count;
          if (entry.mig_enabled && counts.size() == 1 && counts.begin()->first == single_prof->name) per_gpu = counts.begin()->second;
          break;
        }
      for (uint32_t k = single_prof->max_count; per_gpu == 0 && k > 0; --k)
        if (place_counts(*n.model, {{single_prof->name, k}})) per_gpu = k;
      if (per_gpu == 0) per_gpu = 1;
      physical = (count + per_gpu - 1) / per_gpu;
      if (count % per_gpu)
        p.warnings.push_back("Node " + sn.name + ": " + kCountLabel + "=" + std::to_string(count) + " " + single_prof->name +
                             " devices is not a multiple of " + std::to_string(per_gpu) + " per GPU; planned as " +
                             std::to_string(physical) + " GPUs, the last with " + std::to_string(count % per_gpu));
    }
    const int ni = static_cast<int>(p.nodes.size());
    std::vector<Gpu> gpus;
    bool failed = false;
    for (uint32_t i = 0; i < physical && !failed; ++i) {
      Gpu g;
      if (single_prof) {
        g.index = i;
        g.model = n.model;
        g.mig = true;
        const uint32_t k = i + 1 < physical || count % per_gpu == 0 ? per_gpu : count % per_gpu;
        auto placed = place_counts(*n.model, {{single_prof->name, k}});
        if (placed)
          for (const auto& x : *placed) g.instances.push_back({x.profile, x.start, -1});
      } else if (config && !uncatalogued) {
        auto made = gpu_from_config(*n.model, *config, i);
        if (!made) {
          leave_out("GPU " + std::to_string(i) + ": " + made.error().message);
          failed = true;
          break;
        }
        g = *made;
      } else {
        g.index = i;
        g.model = n.model;
        g.instances.push_back({0, 0, -1});
      }
      g.node = ni;
      gpus.push_back(std::move(g));
    }
    if (failed) continue;
    // Every pod the annotation names on a device: "pod", or "pods" where replicas share it.
    auto holders = [](const json& e) {
      std::vector<std::string> out;
      if (std::string pod = str_at(e, "pod"); !pod.empty()) out.push_back(pod);
      for (const auto& x : strings_at(e, "pods"))
        if (!x.empty() && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
      return out;
    };
    std::vector<std::pair<std::string, std::pair<int, int>>> claims;  // pod -> (local gpu, instance)
    const std::vector<Gpu> from_labels = gpus;  // what the labels say, should the annotation be unreadable
    if (sn.layout_annotation && !uncatalogued) {
      // {"gpus": [{"index": 0, "mig": true, "instances": [{"profile": "1g.10gb", "start": 0, "pod": "ns/name"}]},
      //           {"index": 1, "mig": false, "pod": "ns/name"}]}
      std::string why;
      json doc = json::parse(*sn.layout_annotation, nullptr, false);
      const json& list = at(doc, "gpus");
      if (!list.is_array()) why = "not a JSON object with a gpus array";
      std::set<uint32_t> seen;
      for (size_t k = 0; why.empty() && k < list.size(); ++k) {
        const json& e = list[k];
        auto idx = whole_quantity(at(e, "index"));
        if (!idx || *idx < 0 || *idx >= static_cast<int64_t>(physical) || !seen.insert(uint32_t(*idx)).second) {
          why = "gpus[" + std::to_string(k) + "].index is missing, repeated or not below the node's " +
                std::to_string(physical) + " GPUs";
          break;
        }
        Gpu& g = gpus[size_t(*idx)];
        g.instances.clear();
        g.mig = at(e, "mig").is_boolean() && at(e, "mig").get<bool>();
        if (!g.mig) {
          g.instances.push_back({0, 0, -1});
          for (const auto& pod : holders(e)) claims.push_back({pod, {int(*idx), 0}});
          continue;
        }
        MigLayout layout;
        const json& insts = at(e, "instances");
        for (size_t q = 0; insts.is_array() && q < insts.size(); ++q) {
          std::string prof = str_at(insts[q], "profile");
          const auto* gp = n.model->profile(prof);
          auto start = whole_quantity(at(insts[q], "start"));
          if (!gp || !start || *start < 0 || *start >= int64_t(n.model->memory_slices)) {
            why = "gpus[" + std::to_string(k) + "].instances[" + std::to_string(q) + "]: " +
                  (!gp    ? "profile " + quote(prof) + " is not a profile of " + n.model->name
                   : start ? "start " + std::to_string(*start) + " is not a memory slice of " + n.model->name + " (0 to " +
                                 std::to_string(n.model->memory_slices - 1) + ")"
                           : "start is missing or not a whole number");
            break;
          }
          uint32_t pi = static_cast<uint32_t>(gp - n.model->profiles.data());
          layout.push_back({pi, uint32_t(*start)});
          for (const auto& pod : holders(insts[q])) claims.push_back({pod, {int(*idx), int(g.instances.size())}});
          g.instances.push_back({pi, uint32_t(*start), -1});
        }
        if (!why.empty()) break;
        if (auto ok = check_layout(*n.model, layout); !ok)
          why = "gpus[" + std::to_string(k) + "]: " + ok.error().message;
      }
      if (!why.empty()) {
        // Which device holds which pod cannot be told: the node is kept as it is.
        p.warnings.push_back("Node " + sn.name + ": annotation " + kLayoutAnnotation + ": " + why +
                             "; its placements are unknown: the node is kept as it is");
        gpus = from_labels;
        claims.clear();
        n.frozen = true;
      } else {
        n.placements_known = true;
      }
    }
    // GPUs that DRA claims hold: the device plugin's count cannot tell them from free ones.
    if (!sn.dra_devices.empty() && !n.frozen) {
      n.frozen = true;
      p.warnings.push_back("Node " + sn.name + ": " + sn.dra_devices.front() +
                           (sn.dra_devices.size() > 1 ? " (and " + std::to_string(sn.dra_devices.size() - 1) + " more)" : "") +
                           "; which GPUs DRA holds is not told apart from free ones: the node is kept as it is and "
                           "takes no new pod in this plan");
    }
    // A MIG change under way (pending, rebooting) or failed: what the node
    // serves now is not what its labels say until the agent says success.
    if (auto st = sn.labels.find(kMigStateLabel); st != sn.labels.end() && st->second != "success" && !n.frozen) {
      n.frozen = true;
      p.warnings.push_back("Node " + sn.name + ": " + kMigStateLabel + "=" + quote(st->second) + ": " +
                           (st->second == "failed" ? "its last MIG change failed" : "its MIG change is not done") +
                           "; the node is kept as it is and takes no new pod in this plan");
    }
    for (auto& g : gpus) {
      g.single = single_prof != nullptr;
      g.renamed = renamed;
      g.replicas = replicas;
      g.fixed = fixed;
    }
    if (replicas > 1) {
      // Each device once per replica; the annotation's holders of a device take its replicas in turn.
      auto device_replicas = [&](const Gpu& g, const Instance& i) {
        auto it = g.mig && !g.single ? replicas_of.find(n.model->profiles[i.profile].name) : replicas_of.end();
        if (it == replicas_of.end()) it = replicas_of.find("");
        return it == replicas_of.end() ? 1u : it->second;
      };
      std::vector<std::vector<int>> first(gpus.size());  // per GPU and old instance: its first replica's index
      for (size_t g = 0; g < gpus.size(); ++g) {
        std::vector<Instance> each;
        for (const auto& i : gpus[g].instances) {
          first[g].push_back(int(each.size()));
          each.insert(each.end(), device_replicas(gpus[g], i), i);
        }
        first[g].push_back(int(each.size()));
        gpus[g].instances = std::move(each);
      }
      std::map<std::pair<int, int>, int> taken;
      for (auto& [pod, where] : claims) {
        const auto& starts = first[size_t(where.first)];
        int& t = taken[where];
        const int count = starts[size_t(where.second) + 1] - starts[size_t(where.second)];
        if (t >= count) {
          p.warnings.push_back("Node " + sn.name + ": annotation " + kLayoutAnnotation + " names more pods on a device of GPU " +
                               std::to_string(where.first) + " than its " + std::to_string(count) + " replica(s); " + pod +
                               " is counted as if the annotation did not name it");
          where = {-1, -1};
          continue;
        }
        where.second = starts[size_t(where.second)] + t++;
      }
      std::erase_if(claims, [](const auto& c) { return c.second.first < 0; });
    }
    // What the device plugin serves now (status.allocatable: healthy devices only) against what
    // the layout offers: fewer (a device unhealthy, the plugin not started or restarting after a
    // change, a node whose GPUs a DRA driver serves) and the node cannot take what the plan would
    // place there; it is kept as it is. Nodes with no allocatable at all (a hand-made snapshot)
    // are not compared.
    if (sn.devices && !n.frozen) {
      std::map<std::string, int64_t> offered;
      for (const auto& g : gpus)
        for (const auto& i : g.instances) ++offered[resource_key(instance_resource(g, i))];
      for (const auto& [key, count] : offered) {
        auto it = sn.devices->find(key);
        const int64_t served = it == sn.devices->end() ? 0 : it->second;
        if (served < 0 || served >= count) continue;
        n.frozen = true;
        p.warnings.push_back("Node " + sn.name + ": status.allocatable " + key + " is " + std::to_string(served) + " where its layout offers " +
                             std::to_string(count) + (it == sn.devices->end() ? " (no device plugin serves them now)" : " (some unhealthy or not yet served)") +
                             "; the node is kept as it is and takes no new pod in this plan");
        break;
      }
    }
    for (auto& g : gpus) {
      if (g.mig)
        for (const auto& i : g.instances) p.media_engines = p.media_engines || n.model->profiles[i.profile].name.find('+') != std::string::npos;
      n.gpus.push_back(static_cast<int>(p.gpus.size()));
      p.gpus.push_back(std::move(g));
    }
    for (const auto& [pod, where] : claims)
      annotated[pod].push_back({n.gpus[size_t(where.first)], where.second});
    node_index[n.name] = ni;
    p.nodes.push_back(std::move(n));
  }

  // Disruption budgets, as the eviction API applies them: a pod two budgets
  // select is never evicted (the API refuses it); of the running pods one
  // budget selects, only as many as it allows disruptions may be evicted
  // (the first by name), the others are kept like bare pods.
  p.warnings.insert(p.warnings.end(), snap.warnings.begin(), snap.warnings.end());
  std::map<std::string, std::string> guarded;  // pod id -> why it is never evicted
  {
    std::map<std::string, std::vector<const SnapBudget*>> budgets_of;
    for (const auto& sp : snap.pods)
      if (!sp.node.empty() && sp.unreadable.empty())
        for (const auto& b : snap.budgets)
          if (b.selects(sp)) budgets_of[sp.id].push_back(&b);
    std::map<const SnapBudget*, int64_t> left;
    for (const auto& b : snap.budgets) {
      int64_t allowed = 0;
      if (b.allowed) {
        allowed = *b.allowed;
      } else if (b.min_available || b.max_unavailable) {
        // No status (a hand-made snapshot): the disruption controller's
        // arithmetic over the snapshot's pods, all counted healthy when Running.
        int64_t expected = 0, healthy = 0;
        for (const auto& sp : snap.pods)
          if (b.selects(sp)) ++expected, healthy += sp.phase == "Running";
        const int64_t wanted = b.min_available ? scaled(*b.min_available, expected)
                                               : expected - scaled(*b.max_unavailable, expected);
        allowed = std::max<int64_t>(0, healthy - wanted);
      }
      left[&b] = allowed;
    }
    // Priority, as preemption applies it: a pod is evicted only for pods of
    // higher priority. A running pod above every waiting pod's priority
    // would make room only for lower ones: it is kept where it is.
    std::optional<int64_t> highest_waiting;
    for (const auto& sp : snap.pods)
      if (sp.node.empty() && sp.unreadable.empty()) highest_waiting = std::max(highest_waiting.value_or(sp.priority), sp.priority);
    size_t above = 0;
    for (const auto& sp : snap.pods)
      if (highest_waiting && !sp.node.empty() && sp.unreadable.empty() && sp.priority > *highest_waiting) {
        guarded[sp.id] = "";  // said once for all, below
        ++above;
      }
    if (above)
      p.warnings.push_back(std::to_string(above) + " running pod(s) have a priority above every waiting pod's (at most " +
                           std::to_string(*highest_waiting) + "): none is evicted for a lower-priority pod; the GPUs they "
                           "hold are kept as they are (or their node, where its placements are a guess)");
    for (const auto& [pod, budgets] : budgets_of) {  // in pod name order
      if (guarded.contains(pod)) continue;
      if (budgets.size() > 1) {
        guarded[pod] = "two disruption budgets select it (" + budgets[0]->id + ", " + budgets[1]->id +
                       "): the eviction API refuses it";
      } else if (left[budgets[0]] > 0) {
        --left[budgets[0]];
      } else {
        guarded[pod] = "its PodDisruptionBudget " + budgets[0]->id + " allows no more disruptions";
      }
    }
  }

  // Instances the annotation gives to a pod: never counted as another's.
  std::set<std::pair<int, int>> named_instances;
  for (const auto& [pod, where] : annotated) named_instances.insert(where.begin(), where.end());
  for (const auto& sp : snap.pods) {
    if (!sp.unreadable.empty()) {
      // It stops only itself: pending, it is left out; running, its node is
      // kept exactly as it is (what it holds there cannot be told).
      auto it = sp.node.empty() ? node_index.end() : node_index.find(sp.node);
      if (it != node_index.end()) p.nodes[size_t(it->second)].frozen = true;
      p.warnings.push_back("Pod " + sp.id + ": " + sp.unreadable + "; " +
                           (it != node_index.end() ? "its node " + sp.node + " is kept as it is" : "left out"));
      continue;
    }
    Pod pod;
    pod.id = sp.id;
    pod.count = sp.count;
    int r = p.resource_index(sp.resource);
    if (r < 0) {
      r = static_cast<int>(p.resources.size());
      p.resources.push_back(sp.resource);
    }
    pod.resource = r;
    pod.rules = sp.rules;
    pod.priority = sp.priority;
    pod.requests = sp.requests;
    for (const auto& what : sp.rules.unmodelled)
      p.warnings.push_back("Pod " + sp.id + ": its " + what + " is not modelled: the plan may place it where the "
                           "scheduler will not");
    if (sp.resource.find('+') != std::string::npos) p.media_engines = true;
    const int pi = static_cast<int>(p.pods.size());
    if (!sp.node.empty()) {
      auto it = node_index.find(sp.node);
      if (it == node_index.end()) {
        p.warnings.push_back("Pod " + sp.id + " runs on " + sp.node + ", which is not a GPU node in the snapshot; left out");
        continue;
      }
      const Node& n = p.nodes[size_t(it->second)];
      if (!node_offers(p, it->second, sp.resource)) {
        p.warnings.push_back("Pod " + sp.id + " runs on " + n.name + " on " + resource_key(sp.resource) + ", which no device "
                             "there serves as its labels describe them (" + n.model->name + "); left out");
        continue;
      }
      std::vector<std::pair<int, int>> holds;
      if (auto a = annotated.find(sp.id); a != annotated.end()) {
        for (auto [g, i] : a->second) {
          const Gpu& gpu = p.gpus[size_t(g)];
          if (gpu.node == it->second && instance_resource(gpu, gpu.instances[size_t(i)]) == sp.resource &&
              gpu.instances[size_t(i)].pod < 0)
            holds.push_back({g, i});
        }
        if (holds.size() != sp.count) holds.clear();
      }
      const bool named = !holds.empty();
      if (holds.empty()) {
        // Counted per node and profile: the first free instances of its resource, GPU by GPU
        // (also where the annotation does not name it: it holds a device there all the same).
        for (int g : n.gpus) {
          const Gpu& gpu = p.gpus[size_t(g)];
          for (size_t i = 0; i < gpu.instances.size() && holds.size() < sp.count; ++i)
            if (gpu.instances[i].pod < 0 && !named_instances.contains({g, int(i)}) &&
                instance_resource(gpu, gpu.instances[i]) == sp.resource)
              holds.push_back({g, int(i)});
        }
      }
      if (holds.size() != sp.count) {
        // It holds devices there that cannot be told: the node is kept exactly as it is.
        p.nodes[size_t(it->second)].frozen = true;
        p.warnings.push_back("Pod " + sp.id + " runs on " + n.name + " but " +
                             (n.placements_known ? "the layout annotation does not name its " + std::to_string(sp.count) +
                                                       " device(s), nor are there as many free " + sp.resource + " devices"
                                                 : "the node's layout (config " + quote(n.config) + ") has no " +
                                                       std::to_string(sp.count) + " free " + sp.resource + " device(s) for it") +
                             "; the node is kept as it is, and the pod with it");
        continue;
      } else {
        if (!named && n.placements_known)
          p.warnings.push_back("Pod " + sp.id + " runs on " + n.name + ", which the layout annotation does not say; "
                               "counted onto the node's first free " + sp.resource + " device(s)");
        pod.node = it->second;
        pod.holds = holds;
        for (auto [g, i] : holds) p.gpus[size_t(g)].instances[size_t(i)].pod = pi;
        // A bare pod (no owner) is gone for good once evicted, and the
        // eviction API refuses one its budget does not allow: the GPUs it
        // holds are never changed, or, where the node's placements are a
        // guess, the node is kept as it is.
        const auto budget = guarded.find(sp.id);
        if (sp.bare || budget != guarded.end()) {
          if (named) {
            for (auto [g, i] : holds) p.gpus[size_t(g)].fixed = true;
          } else {
            p.nodes[size_t(it->second)].frozen = true;
          }
          if (sp.bare || !budget->second.empty())
            p.warnings.push_back("Pod " + sp.id + " on " + n.name + " " +
                                 (sp.bare ? std::string("has no owner (nothing recreates it after an eviction)") : budget->second) +
                                 ": " + (named ? "the GPU(s) it holds are kept as they are" : "its node is kept as it is"));
        }
      }
    }
    p.pods.push_back(std::move(pod));
  }
  // Where each pod may be placed: only a pod some node that takes pods would refuse is constrained
  // (by its rules, or by the room its cpu, memory, storage or one more pod needs there).
  bool tainted = false, fitted = false;
  for (const auto& n : p.nodes) {
    for (const auto& t : n.taints) tainted = tainted || t.effect == "NoSchedule" || t.effect == "NoExecute";
    fitted = fitted || !n.room.empty();
  }
  for (auto& pod : p.pods) {
    if (!pod.rules.selects() && !tainted && !fitted) continue;
    std::vector<bool> allowed(p.nodes.size(), false);
    bool narrower = false;
    for (size_t n = 0; n < p.nodes.size(); ++n) {
      // A running pod's own node already counts it: it fits there as it is.
      allowed[n] = node_admits(p.nodes[n], pod.rules) && (pod.node == int(n) || fits(p.nodes[n].room, pod.requests));
      narrower = narrower || (p.nodes[n].accepts_pods() && !allowed[n]);
    }
    if (narrower) {
      pod.constrained = true;
      pod.allowed = std::move(allowed);
    }
  }
  std::optional<int64_t> highest;
  for (const auto& pod : p.pods)
    if (!pod.running()) highest = std::max(highest.value_or(pod.priority), pod.priority);
  std::set<int64_t, std::greater<>> levels;
  for (const auto& pod : p.pods)
    if (highest && pod.priority <= *highest) levels.insert(pod.priority);
  if (levels.size() > 1) p.priorities.assign(levels.begin(), levels.end());
  return p;
}

}  // namespace tessera::fleet
