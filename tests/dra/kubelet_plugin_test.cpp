// The DRA driver's gRPC services as the kubelet calls them, over real unix
// sockets: plugin registration (GetInfo, NotifyRegistrationStatus) and
// NodePrepareResources / NodeUnprepareResources, with a per-claim error that
// leaves the other claims of the same call prepared.
#include "dra/kubelet_plugin.hpp"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>

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

TEST(DraKubeletPlugin, RegistersAsADraPluginAndPreparesClaimsOneByOne) {
  testing::TempDir dir;
  const std::string node = dir.path() + "/node";
  ASSERT_EQ(testing::run({TESSERA_BIN, "sim", "create", node, "--gpu", "A100-SXM4-80GB", "--count", "1", "--mig"}).exit_code, 0);
  std::filesystem::create_directories(node + "/usr/lib/x86_64-linux-gnu");
  std::ofstream(node + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1") << "not a library";
  auto session = testing::open_simulated_nvml(TESSERA_SIM_LIBRARY, node);
  ASSERT_TRUE(session) << session.error().message;
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
  auto driver = Driver::start(*session, o, claims);
  ASSERT_TRUE(driver) << driver.error().message;
  KubeletPluginOptions k;
  k.dra_socket = dir.path() + "/plugins/gpu.nvidia.com/dra.sock";
  k.registration_socket = dir.path() + "/plugins_registry/gpu.nvidia.com-reg.sock";
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

}  // namespace
}  // namespace tessera::dra
