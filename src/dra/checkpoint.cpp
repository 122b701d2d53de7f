#include "dra/checkpoint.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "core/file_read.hpp"
#include "core/file_write.hpp"

namespace tessera::dra {
namespace {

using nlohmann::json;

constexpr int kVersion = 1;
constexpr size_t kMaxBytes = 64u << 20;

const char* to_string(CheckpointInstance::State s) {
  switch (s) {
    case CheckpointInstance::State::creating: return "creating";
    case CheckpointInstance::State::ready: return "ready";
    case CheckpointInstance::State::destroying: return "destroying";
  }
  return "?";
}

const char* to_string(CheckpointClaim::State s) {
  switch (s) {
    case CheckpointClaim::State::preparing: return "preparing";
    case CheckpointClaim::State::prepared: return "prepared";
    case CheckpointClaim::State::unpreparing: return "unpreparing";
  }
  return "?";
}

// Reading is strict about types: a checkpoint is ours, and a field of the
// wrong type means it was damaged or written by something else.
struct Reader {
  std::string path;
  std::string error;

  template <typename T>
  T get(const json& j, const char* key, const std::string& where, T fallback = T{}) {
    auto it = j.find(key);
    if (it == j.end()) return fallback;
    try {
      return it->get<T>();
    } catch (const json::exception&) {
      if (error.empty()) error = where + "." + key + " has the wrong type";
      return fallback;
    }
  }
};

}  // namespace

Result<Checkpoint> CheckpointFile::load() const {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return Checkpoint{};
  auto text = read_whole_file(path_, kMaxBytes);
  if (!text) return fail(Errc::io, "the DRA checkpoint " + path_ + ": " + text.error().message);
  auto j = json::parse(*text, nullptr, false);
  auto damaged = [&](const std::string& why) {
    return fail(Errc::parse, "the DRA checkpoint " + path_ + " cannot be read: " + why +
                                 " (it records the MIG instances the driver cut; repair it, or move it away and "
                                 "destroy those instances by hand)");
  };
  if (j.is_discarded() || !j.is_object()) return damaged("it is not JSON");
  if (j.value("version", 0) != kVersion) return damaged("version " + j.value("version", json()).dump() + ", not 1");
  Reader r{path_, {}};
  Checkpoint out;
  out.driver = r.get<std::string>(j, "driver", "");
  out.node = r.get<std::string>(j, "node", "");
  out.boot_id = r.get<std::string>(j, "boot_id", "");
  const json claims = j.value("claims", json::object());
  const json instances = j.value("instances", json::object());
  if (!claims.is_object() || !instances.is_object()) return damaged("claims and instances must be objects");
  for (const auto& [uid, c] : claims.items()) {
    const std::string where = "claims[" + uid + "]";
    if (!c.is_object()) return damaged(where + " is not an object");
    CheckpointClaim claim;
    claim.claim_namespace = r.get<std::string>(c, "namespace", where);
    claim.name = r.get<std::string>(c, "name", where);
    const auto state = r.get<std::string>(c, "state", where);
    if (state == "preparing") claim.state = CheckpointClaim::State::preparing;
    else if (state == "prepared") claim.state = CheckpointClaim::State::prepared;
    else if (state == "unpreparing") claim.state = CheckpointClaim::State::unpreparing;
    else return damaged(where + ".state \"" + state + "\" is unknown");
    const json devices = c.value("devices", json::array());
    if (!devices.is_array()) return damaged(where + ".devices is not a list");
    for (const auto& d : devices) {
      if (!d.is_object()) return damaged(where + ".devices holds a non-object");
      CheckpointDevice dev;
      dev.requests = r.get<std::vector<std::string>>(d, "requests", where);
      dev.pool = r.get<std::string>(d, "pool", where);
      dev.device = r.get<std::string>(d, "device", where);
      dev.gpu_uuid = r.get<std::string>(d, "gpu_uuid", where);
      dev.uuid = r.get<std::string>(d, "uuid", where);
      if (d.contains("share_id")) dev.share_id = r.get<std::string>(d, "share_id", where);
      if (d.contains("memory_bytes")) dev.memory_bytes = r.get<uint64_t>(d, "memory_bytes", where);
      dev.mps = r.get<bool>(d, "mps", where);
      if (d.contains("admin")) dev.admin = r.get<bool>(d, "admin", where);
      if (d.contains("mps_pinned_bytes")) dev.mps_pinned_bytes = r.get<uint64_t>(d, "mps_pinned_bytes", where);
      if (d.contains("mps_thread_percentage"))
        dev.mps_thread_percentage = r.get<uint32_t>(d, "mps_thread_percentage", where);
      if (d.contains("mps_multi_user")) dev.mps_multi_user = r.get<bool>(d, "mps_multi_user", where);
      if (d.contains("timeslice")) dev.timeslice = r.get<uint32_t>(d, "timeslice", where);
      dev.cdi_ids = r.get<std::vector<std::string>>(d, "cdi_ids", where);
      claim.devices.push_back(std::move(dev));
    }
    out.claims[uid] = std::move(claim);
  }
  for (const auto& [name, i] : instances.items()) {
    const std::string where = "instances[" + name + "]";
    if (!i.is_object()) return damaged(where + " is not an object");
    CheckpointInstance inst;
    inst.gpu_uuid = r.get<std::string>(i, "gpu_uuid", where);
    inst.profile = r.get<std::string>(i, "profile", where);
    inst.start = r.get<uint32_t>(i, "start", where);
    const auto state = r.get<std::string>(i, "state", where);
    if (state == "creating") inst.state = CheckpointInstance::State::creating;
    else if (state == "ready") inst.state = CheckpointInstance::State::ready;
    else if (state == "destroying") inst.state = CheckpointInstance::State::destroying;
    else return damaged(where + ".state \"" + state + "\" is unknown");
    inst.gi_id = r.get<uint32_t>(i, "gi_id", where);
    inst.ci_id = r.get<uint32_t>(i, "ci_id", where);
    inst.uuid = r.get<std::string>(i, "uuid", where);
    inst.users = r.get<std::vector<std::string>>(i, "users", where);
    out.instances[name] = std::move(inst);
  }
  out.timeslices = r.get<std::map<std::string, uint32_t>>(j, "timeslices", "checkpoint");
  for (const auto& [uuid, level] : out.timeslices)
    if (level > 3) return damaged("timeslices[" + uuid + "] is " + std::to_string(level) + ", not a level 0 to 3");
  for (const auto& [uid, c] : out.claims)
    for (const auto& d : c.devices)
      if (d.timeslice > 3u) return damaged("claims[" + uid + "] asks for time-slice level " + std::to_string(*d.timeslice));
  if (!r.error.empty()) return damaged(r.error);
  return out;
}

Result<void> CheckpointFile::save(const Checkpoint& c) const {
  json claims = json::object();
  for (const auto& [uid, claim] : c.claims) {
    json devices = json::array();
    for (const auto& d : claim.devices) {
      json dj = {{"requests", d.requests}, {"pool", d.pool},   {"device", d.device}, {"gpu_uuid", d.gpu_uuid},
                 {"uuid", d.uuid},         {"mps", d.mps},     {"cdi_ids", d.cdi_ids}};
      if (d.share_id) dj["share_id"] = *d.share_id;
      if (d.memory_bytes) dj["memory_bytes"] = *d.memory_bytes;
      if (d.timeslice) dj["timeslice"] = *d.timeslice;
      if (d.admin) dj["admin"] = true;
      if (d.mps_pinned_bytes) dj["mps_pinned_bytes"] = *d.mps_pinned_bytes;
      if (d.mps_thread_percentage) dj["mps_thread_percentage"] = *d.mps_thread_percentage;
      if (d.mps_multi_user) dj["mps_multi_user"] = true;
      devices.push_back(std::move(dj));
    }
    claims[uid] = {{"namespace", claim.claim_namespace}, {"name", claim.name}, {"state", to_string(claim.state)},
                   {"devices", devices}};
  }
  json instances = json::object();
  for (const auto& [name, i] : c.instances)
    instances[name] = {{"gpu_uuid", i.gpu_uuid}, {"profile", i.profile}, {"start", i.start},
                       {"state", to_string(i.state)}, {"gi_id", i.gi_id}, {"ci_id", i.ci_id}, {"uuid", i.uuid}, {"users", i.users}};
  json j = {{"version", kVersion}, {"driver", c.driver}, {"node", c.node}, {"claims", claims}, {"instances", instances}};
  if (!c.timeslices.empty()) j["timeslices"] = c.timeslices;
  if (!c.boot_id.empty()) j["boot_id"] = c.boot_id;
  if (auto r = replace_file_durably(path_, j.dump(2) + "\n", 0600); !r)
    return fail(Errc::io, "cannot write the DRA checkpoint: " + r.error().message);
  return {};
}

std::string default_state_dir(const std::string& plugin_dir, const std::string& driver) {
  namespace fs = std::filesystem;
  const std::string dir = plugin_dir + "/tessera";
  const std::string previous = plugin_dir + "/checkpoint.json";
  std::error_code ec;
  if (fs::exists(dir + "/checkpoint.json", ec) || !fs::exists(previous, ec)) return dir;
  auto cp = CheckpointFile(previous).load();
  if (!cp || cp->driver != driver) {
    spdlog::info("{} is not tessera's checkpoint ({}): left alone; tessera keeps its state in {}", previous,
                 cp ? "driver \"" + cp->driver + "\"" : cp.error().message, dir);
    return dir;
  }
  fs::create_directories(dir, ec);
  if (!ec) fs::rename(previous, dir + "/checkpoint.json", ec);
  if (ec) {
    spdlog::warn("cannot move tessera's checkpoint {} into {}: {}; it stays where it is", previous, dir, ec.message());
    return plugin_dir;
  }
  spdlog::info("moved tessera's checkpoint {} into {}", previous, dir);
  return dir;
}

}  // namespace tessera::dra
