#include "config/device_plugin.hpp"

#include <gtest/gtest.h>

namespace tessera::config {
namespace {

std::string errors_of(const Diagnostics& d) {
  std::string out;
  for (const auto& i : d.items()) out += format(i) + "\n";
  return out;
}

TEST(DevicePluginConfig, DefaultsAsNvidiaDocuments) {
  Diagnostics diags;
  auto c = parse_device_plugin_config("version: v1\n", "d.yaml", diags);
  ASSERT_TRUE(c) << errors_of(diags);
  EXPECT_EQ(c->mig_strategy, MigStrategy::none);
  EXPECT_TRUE(c->fail_on_init_error);
  EXPECT_EQ(c->plugin.device_id_strategy, DeviceIdStrategy::uuid);
  ASSERT_EQ(c->plugin.device_list_strategy.size(), 1u);
  EXPECT_EQ(c->plugin.device_list_strategy[0], DeviceListStrategy::envvar);
  EXPECT_EQ(c->mps_root, "/run/nvidia/mps");
  EXPECT_EQ(c->nvidia_dev_root, "/");
  EXPECT_EQ(c->sharing(), nullptr);
}

TEST(DevicePluginConfig, TimeSlicing) {
  Diagnostics diags;
  auto c = parse_device_plugin_config(R"(version: v1
flags:
  migStrategy: mixed
  plugin:
    deviceListStrategy: [envvar, cdi-annotations]
    deviceIDStrategy: index
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
    - name: mig-1g.10gb
      replicas: 2
      devices: ["0:1", "MIG-8f3b5c2a-0000-4000-8000-000000000001"]
)", "ts.yaml", diags);
  ASSERT_TRUE(c) << errors_of(diags);
  EXPECT_EQ(c->mig_strategy, MigStrategy::mixed);
  EXPECT_EQ(c->plugin.device_id_strategy, DeviceIdStrategy::index);
  EXPECT_EQ(c->plugin.device_list_strategy.size(), 2u);
  const auto* s = c->sharing();
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(c->uses_mps());
  EXPECT_TRUE(s->rename_by_default);
  EXPECT_FALSE(s->fail_requests_greater_than_one);  // time-slicing default
  ASSERT_EQ(s->resources.size(), 2u);
  EXPECT_EQ(s->resources[0].replicas, 4u);
  EXPECT_EQ(s->resources[1].name, "nvidia.com/mig-1g.10gb");
  EXPECT_FALSE(s->resources[1].devices.all);
  EXPECT_EQ(s->resources[1].devices.ids.size(), 2u);
}

TEST(DevicePluginConfig, MpsFailsRequestsGreaterThanOneByDefault) {
  Diagnostics diags;
  auto c = parse_device_plugin_config(R"(version: v1
sharing:
  mps:
    resources:
    - name: nvidia.com/gpu
      replicas: 10
)", "mps.yaml", diags);
  ASSERT_TRUE(c) << errors_of(diags);
  ASSERT_TRUE(c->uses_mps());
  EXPECT_TRUE(c->sharing()->fail_requests_greater_than_one);
}

TEST(DevicePluginConfig, ResourceNames) {
  std::string why;
  EXPECT_EQ(normalise_resource_name("gpu", why), "nvidia.com/gpu");
  EXPECT_EQ(normalise_resource_name("nvidia.com/mig-1g.10gb.me", why), "nvidia.com/mig-1g.10gb.me");
  EXPECT_FALSE(normalise_resource_name("nvidia.com/", why));
  EXPECT_FALSE(normalise_resource_name("nvidia.com/gpu shared", why));
  EXPECT_FALSE(normalise_resource_name(std::string(70, 'a'), why));
}

}  // namespace
}  // namespace tessera::config
