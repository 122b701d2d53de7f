#include "plugin/plugin_manager.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/text.hpp"
#include "cuda_quota/env.h"
#include "sharing/allocate.hpp"

namespace tessera::plugin {

PluginManager::PluginManager(PluginOptions options)
    : options_(std::move(options)), state_(std::make_shared<DeviceState>()), health_(options_.health) {}

PluginManager::~PluginManager() { stop(); }

std::string PluginManager::kubelet_socket() const { return options_.kubelet_dir + "/" + kKubeletSocket; }

Result<void> PluginManager::register_one(const std::string& name) {
  auto reg = register_resource(kubelet_socket(), socket_name(name), name);
  if (!reg) return reg;
  ++registrations_;
  spdlog::info("registered {} with the kubelet", name);
  return {};
}

CdiOptions cdi_options(const PluginOptions& options, const config::DevicePluginConfig& config) {
  CdiOptions o = options.cdi;
  // The config's nvidiaDevRoot defaults to its nvidiaDriverRoot; a driver
  // root given here moves the dev root with it unless one is given too.
  if (o.dev_root.empty()) o.dev_root = !o.driver_root.empty() ? o.driver_root : config.nvidia_dev_root;
  if (o.driver_root.empty()) o.driver_root = config.nvidia_driver_root.empty() ? "/" : config.nvidia_driver_root;
  if (o.container_driver_root.empty()) o.container_driver_root = config.plugin.container_driver_root;
  o.names.annotation_prefix = config.plugin.cdi_annotation_prefix;
  const auto& ls = config.plugin.device_list_strategy;
  o.write_specs = std::ranges::any_of(ls, [](config::DeviceListStrategy s) {
    return s == config::DeviceListStrategy::cdi_cri || s == config::DeviceListStrategy::cdi_annotations;
  });
  return o;
}

Result<void> PluginManager::apply(sharing::Inventory inventory, const config::DevicePluginConfig& config) {
  auto resources = sharing::build_resources(inventory, config);
  if (!resources) return unexpected(resources.error());
  std::set<std::string> wanted;
  for (const auto& r : *resources) wanted.insert(r.name);
  Serving serving;
  serving.allocate = sharing::settings_from(config);
  serving.allocate.quota = options_.quota;
  serving.policy = config.plugin.shared_allocation_policy == config::SharedAllocationPolicy::packed
                       ? sharing::SharedPolicy::packed
                       : sharing::SharedPolicy::distributed;
  // The driver's files, and the CDI specs before the devices are published:
  // a new MIG device's name resolves before the kubelet can hand it out.
  const CdiOptions cdi = cdi_options(options_, config);
  serving.allocate.cdi = cdi.names;
  auto driver = read_driver_files(cdi, inventory);
  if (!driver) return unexpected(driver.error());
  if (cdi.write_specs) {
    const auto& q = options_.quota;
    std::string root = q.ledger_root;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    sharing::CdiQuota quota{q.inject, q.library_dir,
                            q.preload == sharing::Preload::env ? std::string() : root + "/" TESSERA_PRELOAD_FILE_NAME};
    auto specs = sharing::cdi_specs(*resources, inventory, *driver, cdi.names, quota);
    if (!specs) return unexpected(specs.error());
    if (auto w = write_cdi_specs(*specs, cdi); !w) return w;
    spdlog::debug("wrote {} CDI spec(s) in {}", specs->size(), cdi.spec_dir);
  }
  if (cdi.write_specs) serving.cdi_spec_dir = cdi.spec_dir;
  serving.driver = std::make_shared<const sharing::DriverFiles>(std::move(*driver));
  // Publish first: servers that stay pick up the new devices at once.
  state_->publish(inventory, *resources, health_, std::move(serving));
  inventory_ = std::move(inventory);
  // Stop servers of resources that went away.
  for (auto it = servers_.begin(); it != servers_.end();) {
    if (wanted.contains(it->first)) {
      ++it;
      continue;
    }
    spdlog::info("no longer advertising {}", it->first);
    it->second->stop();
    it = servers_.erase(it);
  }
  for (const auto& name : wanted) {
    if (servers_.contains(name)) continue;
    ResourceServerOptions opts{name, options_.kubelet_dir + "/" + socket_name(name)};
    auto server = ResourceServer::start(opts, state_);
    if (!server) return unexpected(server.error());
    servers_.emplace(name, std::move(*server));
    spdlog::info("serving {} on {}", name, opts.socket_path);
    if (auto reg = register_one(name); !reg)
      spdlog::warn("{} (will register when the kubelet appears)", reg.error().message);
  }
  return {};
}

Result<void> PluginManager::start(sharing::Inventory inventory) {
  std::lock_guard lock(mutex_);
  auto r = apply(std::move(inventory), options_.config);
  if (!r) return r;
  if (options_.watch_kubelet && !watch_) {
    auto w = KubeletWatch::start(options_.kubelet_dir, [this] {
      spdlog::info("kubelet socket created: registering again");
      auto reg = register_all();
      if (!reg) spdlog::warn("{}", reg.error().message);
    });
    if (!w) return unexpected(w.error());
    watch_ = std::move(*w);
  }
  return {};
}

Result<void> PluginManager::register_all() {
  std::lock_guard lock(mutex_);
  Result<void> first_error;
  for (auto& [name, server] : servers_) {
    // A starting kubelet clears its device-plugin directory: serve again first.
    std::error_code ec;
    if (!std::filesystem::exists(server->options().socket_path, ec)) {
      auto opts = server->options();
      server->stop();
      auto restarted = ResourceServer::start(opts, state_);
      if (!restarted) {
        if (first_error) first_error = unexpected(restarted.error());
        continue;
      }
      server = std::move(*restarted);
    }
    if (auto reg = register_one(name); !reg && first_error) first_error = reg;
  }
  return first_error;
}

Result<void> PluginManager::reload(config::DevicePluginConfig config) {
  std::lock_guard lock(mutex_);
  auto r = apply(inventory_, config);
  if (r) options_.config = std::move(config);
  return r;
}

Result<void> PluginManager::update_inventory(sharing::Inventory inventory) {
  std::lock_guard lock(mutex_);
  if (inventory == inventory_) return {};
  return apply(std::move(inventory), options_.config);
}

void PluginManager::on_event(const sharing::HealthEvent& event) {
  std::lock_guard lock(mutex_);
  if (!health_.record(event) || !state_->refresh_health(health_)) return;
  switch (event.kind) {
    case sharing::HealthEvent::Kind::xid:
      spdlog::warn("XID {} on {}: devices marked Unhealthy", event.xid, event.gpu_uuid);
      break;
    case sharing::HealthEvent::Kind::double_bit_ecc:
      spdlog::warn("double-bit ECC error on {}: devices marked Unhealthy", event.gpu_uuid);
      break;
    default:
      spdlog::warn("{}: devices marked Unhealthy (the driver's event watch failed)", event.gpu_uuid);
  }
}

void PluginManager::set_mps_up(std::set<std::string> uuids) {
  std::lock_guard lock(mutex_);
  std::set<std::string> down;
  for (const auto& d : sharing::mps_daemons(options_.config.mps_root, state_->snapshot()->resources))
    if (!uuids.contains(d.uuid)) down.insert(d.uuid);
  if (!health_.set_services_up(std::move(uuids)) || !state_->refresh_health(health_)) return;
  if (down.empty()) spdlog::info("every MPS control daemon answers: MPS shares Healthy");
  else spdlog::warn("MPS control daemon down for {}: its MPS shares are Unhealthy",
                    join(std::vector<std::string>(down.begin(), down.end())));
}

void PluginManager::withdraw(std::set<std::string> uuids) {
  std::lock_guard lock(mutex_);
  std::string names = join(std::vector<std::string>(uuids.begin(), uuids.end()));
  if (!health_.set_withdrawn(std::move(uuids))) return;
  state_->refresh_health(health_);
  if (names.empty()) spdlog::info("every device is back in service");
  else spdlog::info("taken out of service (Unhealthy to the kubelet): {}", names);
}

sharing::Inventory PluginManager::inventory() const {
  std::lock_guard lock(mutex_);
  return inventory_;
}

config::DevicePluginConfig PluginManager::config() const {
  std::lock_guard lock(mutex_);
  return options_.config;
}

std::vector<sharing::MpsDaemon> PluginManager::mps_daemons() const {
  std::lock_guard lock(mutex_);
  return sharing::mps_daemons(options_.config.mps_root, state_->snapshot()->resources);
}

void PluginManager::tick(sharing::Clock::time_point now) {
  std::lock_guard lock(mutex_);
  static const sharing::GpuProbe by_the_clock = [](const std::string&) { return true; };
  const auto& probe = options_.gpu_answers ? options_.gpu_answers : by_the_clock;
  if (health_.recover(now, probe) && state_->refresh_health(health_)) spdlog::info("devices back to Healthy");
}

void PluginManager::stop() {
  watch_.reset();
  state_->stop();
  std::lock_guard lock(mutex_);
  for (auto& [name, server] : servers_) server->stop();
  servers_.clear();
}

std::vector<std::string> PluginManager::resources() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [name, server] : servers_) out.push_back(name);
  return out;
}

size_t PluginManager::registrations() const {
  std::lock_guard lock(mutex_);
  return registrations_;
}

}  // namespace tessera::plugin
