// The DRA driver's gRPC services as the kubelet calls them, over real unix
// sockets: plugin registration (GetInfo, NotifyRegistrationStatus) and
// NodePrepareResources / NodeUnprepareResources, with a per-claim error that
// leaves the other claims of the same call prepared.
#include "dra/kubelet_plugin.hpp"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <stdexcept>

#include "dra/proto/dra_health_v1alpha1.grpc.pb.h"
#include "dra/proto/dra_v1.grpc.pb.h"
#include "dra/proto/pluginregistration_v1.grpc.pb.h"
#include "support/run.hpp"
#include "support/sim_nvml.hpp"

namespace tessera::dra {
namespace {

using nlohmann::json;
namespace api = k8s::io::kubelet::pkg::apis::dra::v1;

class OneClaim final : public ClaimSource {
 public:
  std::map<std::string, json> objects;
  Result<json> get_claim(const std::string& ns, const std::string& name) override {
    auto it = objects.find(ns + "/" + name);
    if (it == objects.end()) return fail(Errc::not_found, "resourceclaims \"" + name + "\" not found");
    return it->second;
  }
};

std::shared_ptr<grpc::Channel> dial(const std::string& socket) {
  return grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
}

// A simulated node of one A100 in MIG mode with nothing cut, its NVML open.
nvml::Session sim_node(const testing::TempDir& dir, std::string& node) {
  node = dir.path() + "/node";
  EXPECT_EQ(testing::run({TESSERA_BIN, "sim", "create", node, "--gpu", "A100-SXM4-80GB", "--count", "1", "--mig"}).exit_code, 0);
  std::filesystem::create_directories(node + "/usr/lib/x86_64-linux-gnu");
  std::ofstream(node + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1") << "not a library";
  auto session = testing::open_simulated_nvml(TESSERA_SIM_LIBRARY, node);
  if (!session) throw std::runtime_error("cannot open the simulated NVML: " + session.error().message);
  return std::move(*session);
}

// The kubelet's sockets, as the kubelet lays them out, under `dir`.
KubeletPluginOptions sockets_in(const testing::TempDir& dir) {
  KubeletPluginOptions k;
  k.dra_socket = dir.path() + "/plugins/gpu.nvidia.com/dra.sock";
  k.registration_socket = dir.path() + "/plugins_registry/gpu.nvidia.com-reg.sock";
  return k;
}

TEST(DraKubeletPlugin, RegistersAsADraPluginAndPreparesClaimsOneByOne) {
  testing::TempDir dir;
  std::string node;
  auto session = sim_node(dir, node);
  OneClaim claims;
  claims.objects["default/good"] = {
      {"metadata", {{"namespace", "default"}, {"name", "good"}, {"uid", "uid-good"}}},
      {"status",
       {{"allocation",
         {{"devices",
           {{"results", json::array({{{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "node-a"},
                                      {"device", "gpu-0-mig-2g20gb-14-4"}}})}}}}}}}};
  DriverOptions o;
  o.node = "node-a";
  o.state_dir = dir.path() + "/plugins/gpu.nvidia.com";
  o.cdi.write_specs = true;
  o.cdi.spec_dir = dir.path() + "/cdi";
  o.cdi.container_driver_root = node;
  o.cdi.names.vendor = "k8s.gpu.nvidia.com";
  auto driver = Driver::start(session, o, claims);
  ASSERT_TRUE(driver) << driver.error().message;
  const KubeletPluginOptions k = sockets_in(dir);
  auto plugin = KubeletPlugin::start(k, **driver);
  ASSERT_TRUE(plugin) << plugin.error().message;

  // Registration, as the kubelet's plugin watcher does it.
  auto reg = pluginregistration::Registration::NewStub(dial(k.registration_socket));
  pluginregistration::PluginInfo info;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(reg->GetInfo(&ctx, {}, &info).ok());
  }
  EXPECT_EQ(info.type(), "DRAPlugin");
  EXPECT_EQ(info.name(), "gpu.nvidia.com");
  EXPECT_EQ(info.endpoint(), k.dra_socket);
  ASSERT_EQ(info.supported_versions_size(), 1);
  EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin");
  EXPECT_FALSE((*plugin)->registered());
  {
    grpc::ClientContext ctx;
    pluginregistration::RegistrationStatus st;
    st.set_plugin_registered(true);
    pluginregistration::RegistrationStatusResponse resp;
    ASSERT_TRUE(reg->NotifyRegistrationStatus(&ctx, st, &resp).ok());
  }
  EXPECT_TRUE((*plugin)->registered());

  // Two claims in one call: one prepared, one refused on its own.
  auto dra = api::DRAPlugin::NewStub(dial(info.endpoint()));
  api::NodePrepareResourcesRequest req;
  for (auto [uid, name] : {std::pair{"uid-good", "good"}, std::pair{"uid-gone", "gone"}}) {
    auto* c = req.add_claims();
    c->set_uid(uid);
    c->set_namespace_("default");
    c->set_name(name);
  }
  api::NodePrepareResourcesResponse resp;
  {
    grpc::ClientContext ctx;
    auto status = dra->NodePrepareResources(&ctx, req, &resp);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  ASSERT_EQ(resp.claims().size(), 2u);
  const auto& good = resp.claims().at("uid-good");
  EXPECT_EQ(good.error(), "");
  ASSERT_EQ(good.devices_size(), 1);
  EXPECT_EQ(good.devices(0).pool_name(), "node-a");
  EXPECT_EQ(good.devices(0).device_name(), "gpu-0-mig-2g20gb-14-4");
  ASSERT_EQ(good.devices(0).request_names_size(), 1);
  EXPECT_EQ(good.devices(0).request_names(0), "gpu");
  ASSERT_EQ(good.devices(0).cdi_device_ids_size(), 1);
  EXPECT_EQ(good.devices(0).cdi_device_ids(0), "k8s.gpu.nvidia.com/claim=uid-good-gpu-0-mig-2g20gb-14-4");
  EXPECT_NE(resp.claims().at("uid-gone").error().find("not found"), std::string::npos) << resp.claims().at("uid-gone").error();

  api::NodeUnprepareResourcesRequest un;
  *un.add_claims() = req.claims(0);
  api::NodeUnprepareResourcesResponse unresp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(dra->NodeUnprepareResources(&ctx, un, &unresp).ok());
  }
  EXPECT_EQ(unresp.claims().at("uid-good").error(), "");
  EXPECT_TRUE((*driver)->checkpoint().instances.empty());

  (*plugin)->stop();
  EXPECT_FALSE(std::filesystem::exists(k.dra_socket));
  EXPECT_FALSE(std::filesystem::exists(k.registration_socket));
}

// A driver with no claims on a simulated node, its plugin on the kubelet's sockets.
struct Served {
  testing::TempDir dir;
  std::string node;
  nvml::Session session = sim_node(dir, node);
  OneClaim claims;
  KubeletPluginOptions k = sockets_in(dir);
  std::unique_ptr<Driver> driver;
  std::unique_ptr<KubeletPlugin> plugin;
  Served() {
    DriverOptions o;
    o.node = "node-a";
    o.state_dir = dir.path() + "/plugins/gpu.nvidia.com";
    auto d = Driver::start(session, o, claims);
    if (!d) throw std::runtime_error("the driver did not start: " + d.error().message);
    driver = std::move(*d);
    auto p = KubeletPlugin::start(k, *driver);
    if (!p) throw std::runtime_error("the plugin did not start: " + p.error().message);
    plugin = std::move(*p);
  }
};

// The liveness check (/healthz): the kubelet can reach the plugin while both sockets answer as
// the kubelet calls them; a socket removed under the driver (never served again until it restarts)
// or replaced by a file is named.
TEST(DraKubeletPlugin, SelfCheckSaysWhetherTheKubeletCanReachIt) {
  Served s;
  EXPECT_EQ(s.plugin->self_check(), "");
  std::filesystem::remove(s.k.registration_socket);
  EXPECT_EQ(s.plugin->self_check(), "the socket " + s.k.registration_socket + " is gone: the kubelet cannot reach the driver");
  s.plugin->stop();
  auto again = KubeletPlugin::start(s.k, *s.driver);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ((*again)->self_check(), "");
  std::filesystem::remove(s.k.dra_socket);
  std::ofstream(s.k.dra_socket) << "";
  EXPECT_EQ((*again)->self_check(), "the socket " + s.k.dra_socket + " is gone: the kubelet cannot reach the driver");
}

// KEP-4680's health stream, as the kubelet reads it: every published device
// healthy at once; an XID on the GPU sends the list again at once with the GPU
// unhealthy and why; stopping the plugin ends an open stream without waiting
// for the server's deadline.
TEST(DraKubeletPlugin, StreamsEveryDevicesHealthAndAnXidMakesItsGpuUnhealthy) {
  Served s;

  auto stub = ::v1alpha1::DRAResourceHealth::NewStub(dial(s.k.dra_socket));
  grpc::ClientContext ctx;
  auto stream = stub->NodeWatchResources(&ctx, {});
  ::v1alpha1::NodeWatchResourcesResponse first;
  ASSERT_TRUE(stream->Read(&first));
  const size_t published = s.driver->pool().devices.size();
  ASSERT_EQ(size_t(first.devices_size()), published);
  ASSERT_GT(published, 1u);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& d : first.devices()) {
    EXPECT_EQ(d.device().pool_name(), "node-a");
    EXPECT_EQ(d.health(), ::v1alpha1::HEALTHY) << d.device().device_name();
    EXPECT_NEAR(double(d.last_updated_time()), double(now), 5.0);
    EXPECT_EQ(d.health_check_timeout_seconds(), 60);
  }

  sharing::HealthEvent xid;
  xid.xid = 48;  // a double-bit ECC error: the whole GPU
  xid.gpu_uuid = std::string(*s.session.device(0)->uuid());
  xid.at = sharing::Clock::now();
  const auto sent = std::chrono::steady_clock::now();
  s.driver->record_health(xid);
  ::v1alpha1::NodeWatchResourcesResponse after;
  ASSERT_TRUE(stream->Read(&after));
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(5)) << "sent at the change, not at the refresh";
  // In MIG mode the GPU is published as its placements: each of them now unhealthy, and why.
  ASSERT_EQ(size_t(after.devices_size()), published);
  for (const auto& d : after.devices()) {
    EXPECT_EQ(d.health(), ::v1alpha1::UNHEALTHY) << d.device().device_name();
    EXPECT_EQ(d.message(), "tainted gpu.nvidia.com/xid=48:NoSchedule") << d.device().device_name();
  }

  const auto stopping = std::chrono::steady_clock::now();
  s.plugin->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(2)) << "the open stream held the stop";
  ::v1alpha1::NodeWatchResourcesResponse none;
  EXPECT_FALSE(stream->Read(&none));
}

}  // namespace
}  // namespace tessera::dra
