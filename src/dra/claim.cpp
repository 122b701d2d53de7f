#include "dra/claim.hpp"

#include <algorithm>
#include <set>

#include "core/units.hpp"

namespace tessera::dra {
namespace {

using nlohmann::json;

Error config_error(const std::string& where, const std::string& why) {
  return Error{Errc::validation, "opaque config" + (where.empty() ? "" : " " + where) + ": " + why};
}

Result<void> only_fields(const json& object, const std::string& where, std::initializer_list<const char*> allowed) {
  if (!object.is_object()) return unexpected(config_error(where, "must be an object, not " + std::string(object.type_name())));
  for (const auto& [key, value] : object.items()) {
    (void)value;
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; })) {
      std::string names;
      for (const char* a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
      return unexpected(config_error(where, "unknown field \"" + key + "\" (known: " + names + ")"));
    }
  }
  return {};
}

// A quantity: a string ("10Gi") or a number of bytes.
Result<uint64_t> read_quantity(const json& v, const std::string& where) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > 0) return v.get<uint64_t>();
  if (v.is_number_integer()) return unexpected(config_error(where, "must be more than 0"));
  if (!v.is_string()) return unexpected(config_error(where, "must be a quantity such as \"10Gi\""));
  auto bytes = parse_bytes(v.get<std::string>());
  if (!bytes) return unexpected(config_error(where, bytes.error().message));
  if (*bytes == 0) return unexpected(config_error(where, "must be more than 0"));
  return *bytes;
}

Result<SharingConfig> read_sharing(const json& s, DeviceConfig::Kind kind) {
  SharingConfig out;
  if (auto ok = only_fields(s, "sharing", {"strategy", "timeSlicingConfig", "mpsConfig"}); !ok) return unexpected(ok.error());
  if (!s.contains("strategy") || !s["strategy"].is_string())
    return unexpected(config_error("sharing.strategy", "is required: TimeSlicing or MPS"));
  const std::string strategy = s["strategy"];
  if (strategy == "TimeSlicing") out.strategy = SharingConfig::Strategy::time_slicing;
  else if (strategy == "MPS") out.strategy = SharingConfig::Strategy::mps;
  else return unexpected(config_error("sharing.strategy", "\"" + strategy + "\" is neither TimeSlicing nor MPS"));
  if (s.contains("timeSlicingConfig")) {
    if (out.strategy != SharingConfig::Strategy::time_slicing)
      return unexpected(config_error("sharing.timeSlicingConfig", "is for the TimeSlicing strategy only"));
    if (kind == DeviceConfig::Kind::mig)
      return unexpected(config_error("sharing.timeSlicingConfig", "a MigDeviceConfig has no timeSlicingConfig"));
    const auto& t = s["timeSlicingConfig"];
    if (auto ok = only_fields(t, "sharing.timeSlicingConfig", {"interval"}); !ok) return unexpected(ok.error());
    if (t.contains("interval")) {
      if (!t["interval"].is_string())
        return unexpected(config_error("sharing.timeSlicingConfig.interval", "must be Default, Short, Medium or Long"));
      const std::string interval = t["interval"];
      // NVIDIA's TimeSlicingConfig intervals, in `nvidia-smi compute-policy --set-timeslice` order.
      const auto& names = kTimeSliceIntervals;
      const auto found = std::find(std::begin(names), std::end(names), interval);
      if (found == std::end(names))
        return unexpected(config_error("sharing.timeSlicingConfig.interval",
                                       "\"" + interval + "\" is not one of Default, Short, Medium, Long"));
      out.timeslice = static_cast<uint32_t>(found - std::begin(names));
    }
  }
  if (s.contains("mpsConfig")) {
    if (out.strategy != SharingConfig::Strategy::mps)
      return unexpected(config_error("sharing.mpsConfig", "is for the MPS strategy only"));
    const auto& m = s["mpsConfig"];
    if (auto ok = only_fields(m, "sharing.mpsConfig",
                              {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit",
                               "defaultPerDevicePinnedMemoryLimit", "multiUser"});
        !ok)
      return unexpected(ok.error());
    if (m.contains("defaultActiveThreadPercentage")) {
      const auto& p = m["defaultActiveThreadPercentage"];
      if (!p.is_number_integer() || p.get<int64_t>() < 1 || p.get<int64_t>() > 100)
        return unexpected(config_error("sharing.mpsConfig.defaultActiveThreadPercentage", "must be an integer from 1 to 100"));
      out.active_thread_percentage = p.get<uint32_t>();
    }
    if (m.contains("defaultPinnedDeviceMemoryLimit")) {
      auto q = read_quantity(m["defaultPinnedDeviceMemoryLimit"], "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit");
      if (!q) return unexpected(q.error());
      out.pinned_memory_limit = *q;
    }
    if (m.contains("defaultPerDevicePinnedMemoryLimit")) {
      const auto& per = m["defaultPerDevicePinnedMemoryLimit"];
      if (!per.is_object())
        return unexpected(config_error("sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit",
                                       "must map a device (UUID or index) to a quantity"));
      for (const auto& [dev, v] : per.items()) {
        auto q = read_quantity(v, "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[" + dev + "]");
        if (!q) return unexpected(q.error());
        out.per_device_pinned_memory_limit[dev] = *q;
      }
    }
    if (m.contains("multiUser")) {
      if (!m["multiUser"].is_boolean()) return unexpected(config_error("sharing.mpsConfig.multiUser", "must be true or false"));
      out.multi_user = m["multiUser"].get<bool>();
    }
  }
  return out;
}

std::string claim_label(const json& claim) {
  if (!claim.is_object() || !claim.contains("metadata") || !claim["metadata"].is_object()) return "?";
  const auto& md = claim["metadata"];
  auto text = [&](const char* key) { return md.contains(key) && md[key].is_string() ? md[key].get<std::string>() : "?"; };
  return text("namespace") + "/" + text("name");
}

}  // namespace

Result<DeviceConfig> parse_device_config(const json& p) {
  if (!p.is_object()) return unexpected(config_error("", "parameters must be an object"));
  for (const char* key : {"apiVersion", "kind"})
    if (p.contains(key) && !p[key].is_string()) return unexpected(config_error(key, "must be a string"));
  if (auto ok = only_fields(p, "", {"apiVersion", "kind", "sharing"}); !ok) return unexpected(ok.error());
  const std::string api = p.value("apiVersion", "");
  if (api != kNvidiaConfigApiVersion)
    return unexpected(config_error("apiVersion", "\"" + api + "\" is not " + kNvidiaConfigApiVersion));
  DeviceConfig out;
  const std::string kind = p.value("kind", "");
  if (kind == "GpuConfig") out.kind = DeviceConfig::Kind::gpu;
  else if (kind == "MigDeviceConfig") out.kind = DeviceConfig::Kind::mig;
  else return unexpected(config_error("kind", "\"" + kind + "\" is neither GpuConfig nor MigDeviceConfig"));
  if (p.contains("sharing")) {
    auto s = read_sharing(p["sharing"], out.kind);
    if (!s) return unexpected(s.error());
    out.sharing = *s;
  }
  return out;
}

static Result<ClaimAllocation> read_allocation_unchecked(const json& claim, const std::string& driver,
                                                         const std::string& pool, const std::string& expected_uid);

Result<ClaimAllocation> read_allocation(const json& claim, const std::string& driver, const std::string& pool,
                                        const std::string& expected_uid) {
  // The API's objects are checked field by field below; a field of a type
  // the API never writes is a malformed claim, not a crash.
  try {
    return read_allocation_unchecked(claim, driver, pool, expected_uid);
  } catch (const json::exception& e) {
    return fail(Errc::validation, "claim " + claim_label(claim) + ": malformed ResourceClaim (" + e.what() + ")");
  }
}

static Result<ClaimAllocation> read_allocation_unchecked(const json& claim, const std::string& driver,
                                                         const std::string& pool, const std::string& expected_uid) {
  const std::string label = "claim " + claim_label(claim);
  if (!claim.is_object() || !claim.contains("metadata") || !claim["metadata"].is_object())
    return fail(Errc::validation, label + ": not a ResourceClaim");
  ClaimAllocation out;
  out.uid = claim["metadata"].value("uid", "");
  out.claim_namespace = claim["metadata"].value("namespace", "");
  out.name = claim["metadata"].value("name", "");
  if (!expected_uid.empty() && out.uid != expected_uid)
    return fail(Errc::conflict, label + ": its UID is " + out.uid + ", not " + expected_uid +
                                    " (the claim was deleted and created again)");
  const json* alloc = nullptr;
  if (claim.contains("status") && claim["status"].contains("allocation")) alloc = &claim["status"]["allocation"];
  if (!alloc || !alloc->is_object()) return fail(Errc::conflict, label + ": not allocated yet");
  const json devices = alloc->value("devices", json::object());
  const json results = devices.value("results", json::array());
  const json configs = devices.value("config", json::array());
  if (!results.is_array() || !configs.is_array()) return fail(Errc::validation, label + ": malformed allocation");

  // The configs meant for this driver, class ones first (the API lists them so).
  struct Applies {
    std::vector<std::string> requests;
    DeviceConfig config;
    bool from_class;
  };
  std::vector<Applies> mine;
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto& c = configs[i];
    if (!c.is_object() || !c.contains("opaque")) continue;
    const auto& o = c["opaque"];
    if (!o.is_object() || o.value("driver", "") != driver) continue;
    auto parsed = parse_device_config(o.value("parameters", json()));
    if (!parsed)
      return fail(Errc::validation, label + ": config " + std::to_string(i) + " (" + c.value("source", "?") + "): " +
                                        parsed.error().message);
    Applies a{{}, *parsed, c.value("source", "") == "FromClass"};
    for (const auto& r : c.value("requests", json::array()))
      if (r.is_string()) a.requests.push_back(r);
    mine.push_back(std::move(a));
  }
  std::stable_sort(mine.begin(), mine.end(), [](const Applies& a, const Applies& b) { return a.from_class && !b.from_class; });

  for (const auto& r : results) {
    if (!r.is_object() || r.value("driver", "") != driver || r.value("pool", "") != pool) continue;
    AllocatedDevice d;
    d.request = r.value("request", "");
    d.pool = r.value("pool", "");
    d.device = r.value("device", "");
    if (d.device.empty()) return fail(Errc::validation, label + ": an allocation result names no device");
    if (r.contains("shareID") && r["shareID"].is_string()) d.share_id = r["shareID"].get<std::string>();
    if (r.contains("adminAccess") && !r["adminAccess"].is_null()) {
      if (!r["adminAccess"].is_boolean())
        return fail(Errc::validation, label + ": device " + d.device + ": adminAccess is " + r["adminAccess"].dump() +
                                          ", not true or false");
      d.admin = r["adminAccess"].get<bool>();
    }
    if (r.contains("consumedCapacity") && r["consumedCapacity"].contains("memory")) {
      auto q = parse_bytes(r["consumedCapacity"]["memory"].is_string() ? r["consumedCapacity"]["memory"].get<std::string>()
                                                                        : r["consumedCapacity"]["memory"].dump());
      if (!q) return fail(Errc::validation, label + ": device " + d.device + ": consumedCapacity.memory: " + q.error().message);
      d.memory_bytes = *q;
    }
    // "gpu/small" (a subrequest) is configured as its parent "gpu" too.
    const std::string parent = d.request.substr(0, d.request.find('/'));
    for (const auto& a : mine) {
      bool applies = a.requests.empty() ||
                     std::any_of(a.requests.begin(), a.requests.end(), [&](const std::string& q) { return q == d.request || q == parent; });
      if (applies) d.config = a.config;
    }
    out.devices.push_back(std::move(d));
  }
  return out;
}

}  // namespace tessera::dra
