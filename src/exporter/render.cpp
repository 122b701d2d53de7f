#include "exporter/render.hpp"

#include <charconv>
#include <functional>
#include <vector>

namespace tessera::exporter {
namespace {

std::string number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

std::string number(uint64_t v) { return std::to_string(v); }

// The labels every device series carries, in dcgm-exporter's order.
std::string device_labels(const DeviceLabels& l, const std::optional<Owner>& owner) {
  std::string s;
  s.reserve(256);
  s += "gpu=\"" + std::to_string(l.gpu) + "\",UUID=\"" + escape_label_value(l.uuid) + "\",pci_bus_id=\"" +
       escape_label_value(l.pci_bus_id) + "\",device=\"" + escape_label_value(l.device) + "\",modelName=\"" +
       escape_label_value(l.model_name) + "\"";
  if (l.mig)
    s += ",GPU_I_PROFILE=\"" + escape_label_value(l.mig_profile) + "\",GPU_I_ID=\"" +
         std::to_string(l.gpu_instance_id) + "\"";
  if (!l.hostname.empty()) s += ",Hostname=\"" + escape_label_value(l.hostname) + "\"";
  if (owner)
    s += ",pod=\"" + escape_label_value(owner->pod) + "\",namespace=\"" + escape_label_value(owner->pod_namespace) +
         "\",container=\"" + escape_label_value(owner->container) + "\"";
  return s;
}

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void family(const char* name, const char* type, const char* help, const std::vector<std::string>& lines) {
    if (lines.empty()) return;
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
    for (const auto& l : lines) {
      out_ += name;
      out_ += l;
      out_ += '\n';
    }
  }

 private:
  std::string& out_;
};

using Pick = std::function<std::optional<std::string>(const DeviceSample&)>;

template <class T>
Pick field(std::optional<T> DeviceSample::*member) {
  return [member](const DeviceSample& d) -> std::optional<std::string> {
    const auto& v = d.*member;
    if (!v) return std::nullopt;
    if constexpr (std::is_floating_point_v<T>)
      return number(static_cast<double>(*v));
    else
      return number(static_cast<uint64_t>(*v));
  };
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string render(const Sample& sample, const std::string& version) {
  std::vector<std::string> labels;
  labels.reserve(sample.devices.size());
  for (const auto& d : sample.devices) labels.push_back(device_labels(d.labels, d.owner));

  std::string out;
  out.reserve(512 + sample.devices.size() * 20 * 300 + sample.replicas.size() * 2 * 400);
  Writer w(out);
  auto per_device = [&](const char* name, const char* type, const char* help, const Pick& pick) {
    std::vector<std::string> lines;
    for (size_t i = 0; i < sample.devices.size(); ++i)
      if (auto v = pick(sample.devices[i])) lines.push_back("{" + labels[i] + "} " + *v);
    w.family(name, type, help, lines);
  };

  per_device("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", field(&DeviceSample::fb_used_mib));
  per_device("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", field(&DeviceSample::fb_free_mib));
  per_device("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB).",
             field(&DeviceSample::fb_total_mib));
  per_device("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved by the driver (in MiB).",
             field(&DeviceSample::fb_reserved_mib));
  per_device("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
             field(&DeviceSample::gr_engine_active));
  per_device("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned.",
             field(&DeviceSample::sm_active));
  per_device("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM.",
             field(&DeviceSample::sm_occupancy));
  per_device("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
             "Ratio of cycles the device memory interface is active sending or receiving data.",
             field(&DeviceSample::dram_active));
  per_device("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles any tensor pipe is active.",
             field(&DeviceSample::tensor_active));
  per_device("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", field(&DeviceSample::temperature_c));
  per_device("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", field(&DeviceSample::power_w));
  per_device("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", field(&DeviceSample::sm_clock_mhz));
  per_device("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
             field(&DeviceSample::mem_clock_mhz));
  // Cumulative counts, typed gauge: promtool wants counters to end in _total,
  // and dcgm-exporter's names end in _TOTAL (docs/metrics.md).
  per_device("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "gauge", "Total number of single-bit volatile ECC errors.",
             field(&DeviceSample::ecc_sbe_volatile));
  per_device("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gauge", "Total number of double-bit volatile ECC errors.",
             field(&DeviceSample::ecc_dbe_volatile));
  {
    std::vector<std::string> lines;
    for (size_t i = 0; i < sample.devices.size(); ++i) {
      const auto& d = sample.devices[i];
      if (!d.up && !d.last_xid) continue;
      uint64_t last = d.last_xid.value_or(0);
      lines.push_back("{" + labels[i] + ",err_code=\"" + std::to_string(last) + "\"} " + number(last));
    }
    w.family("DCGM_FI_DEV_XID_ERRORS", "gauge",
             "Value of the last XID error encountered (0: none since the exporter started).", lines);
  }
  {
    std::vector<std::string> lines;
    for (size_t i = 0; i < sample.devices.size(); ++i)
      for (const auto& [xid, count] : sample.devices[i].xid_counts)
        lines.push_back("{" + labels[i] + ",xid=\"" + std::to_string(xid) + "\"} " + number(count));
    w.family("tessera_xid_errors_total", "counter", "XID errors seen since the exporter started, by XID.", lines);
  }
  {
    std::vector<std::string> lines;
    for (size_t i = 0; i < sample.devices.size(); ++i)
      lines.push_back("{" + labels[i] + "} " + (sample.devices[i].up ? "1" : "0"));
    w.family("tessera_device_up", "gauge",
             "1 when the last sample read the GPU or MIG device, 0 when an NVML call for it failed.", lines);
  }
  {
    std::vector<std::string> used, quota, backend;
    for (const auto& r : sample.replicas) {
      std::string labels_text = device_labels(r.labels, r.owner) + ",replica=\"" + escape_label_value(r.replica) + "\"";
      std::string l = "{" + labels_text + "} ";
      used.push_back(l + number(r.used_bytes));
      quota.push_back(l + number(r.quota_bytes));
      backend.push_back("{" + labels_text + ",backend=\"" + (r.driver_enforced ? "driver" : "library") + "\"} 1");
    }
    w.family("tessera_replica_memory_used_bytes", "gauge",
             "Device memory a shared replica's container holds, from its quota ledger.", used);
    w.family("tessera_replica_memory_quota_bytes", "gauge",
             "Device memory quota of a shared replica's container, from its quota ledger.", quota);
    w.family("tessera_replica_memory_quota_backend", "gauge",
             "What holds a shared replica's quota: the driver's own memory limit (backend=\"driver\", set by the "
             "memory hook) or the quota library alone (backend=\"library\").",
             backend);
  }
  if (sample.last_success_unix > 0)
    w.family("tessera_sampler_last_success_timestamp_seconds", "gauge",
             "Unix time of the last complete sample.", {" " + number(sample.last_success_unix)});
  w.family("tessera_sampler_duration_seconds", "gauge", "Duration of the last sample.",
           {" " + number(sample.duration_seconds)});
  w.family("tessera_exporter_info", "gauge", "The exporter's version.",
           {"{version=\"" + escape_label_value(version) + "\"} 1"});
  return out;
}

}  // namespace tessera::exporter
