// The DRA driver's NodePrepareResources and NodeUnprepareResources through
// its real unix socket, as the kubelet calls them, over a simulated node:
//   - a memory share of a whole GPU (the claim's quota files, its CDI spec,
//     the checkpoint written twice, each fsynced);
//   - a MIG instance cut at prepare and destroyed at unprepare;
// next to the floor measured in the same run: a bare gRPC unary call to the
// driver's own registration service (GetInfo) over the same kind of socket.
// Prints p50/p99 per case and the ratio to the floor; exits non-zero when a
// call fails.
//   Usage: bench_dra_prepare [--rounds N]
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "dra/kubelet_plugin.hpp"
#include "dra/proto/dra_v1.grpc.pb.h"
#include "dra/proto/pluginregistration_v1.grpc.pb.h"
#include "nvml/session.hpp"

namespace {

using namespace tessera;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace api = k8s::io::kubelet::pkg::apis::dra::v1;

class Claims final : public dra::ClaimSource {
 public:
  std::map<std::string, json> objects;
  Result<json> get_claim(const std::string& ns, const std::string& name) override {
    auto it = objects.find(ns + "/" + name);
    if (it == objects.end()) return fail(Errc::not_found, name + " not found");
    return it->second;
  }
};

json claim(const std::string& uid, const std::string& device, const char* memory) {
  json result = {{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "bench-node"}, {"device", device}};
  if (memory) result["consumedCapacity"] = {{"memory", memory}};
  return {{"metadata", {{"namespace", "default"}, {"name", uid}, {"uid", uid}}},
          {"status", {{"allocation", {{"devices", {{"results", json::array({result})}}}}}}}};
}

struct Stats {
  double p50 = 0, p99 = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))]; };
  return {at(0.50), at(0.99)};
}

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

struct Node {
  std::string dir;
  std::string node;
  Claims claims;
  std::optional<nvml::Session> session;
  std::unique_ptr<dra::Driver> driver;
  std::unique_ptr<dra::KubeletPlugin> plugin;
  dra::KubeletPluginOptions sockets;
};

bool make_node(Node& n, const std::string& root, bool mig, bool shares) {
  n.dir = root;
  n.node = root + "/node";
  const std::string create = std::string(TESSERA_BIN) + " sim create " + n.node +
                             " --gpu A100-SXM4-80GB --count 8" + (mig ? " --mig" : "") + " >/dev/null";
  if (std::system(create.c_str()) != 0) return false;
  std::filesystem::create_directories(n.node + "/usr/lib/x86_64-linux-gnu");
  std::ofstream(n.node + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1") << "not a library";
  ::setenv("TESSERA_SIM", n.node.c_str(), 1);
  auto lib = nvml::Library::open(TESSERA_SIM_LIBRARY);
  if (!lib) return false;
  auto s = nvml::Session::open(std::move(*lib));
  if (!s) return false;
  n.session.emplace(std::move(*s));
  dra::DriverOptions o;
  o.node = "bench-node";
  o.state_dir = root + "/plugins/gpu.nvidia.com";
  o.cdi.write_specs = true;
  o.cdi.spec_dir = root + "/cdi";
  o.cdi.container_driver_root = n.node;
  o.cdi.names.vendor = "k8s.gpu.nvidia.com";
  o.memory_shares = shares;
  o.quota.library_dir = root + "/lib";
  o.quota.ledger_root = root + "/ledgers";
  auto d = dra::Driver::start(*n.session, o, n.claims);
  if (!d) {
    std::fprintf(stderr, "driver: %s\n", d.error().message.c_str());
    return false;
  }
  n.driver = std::move(*d);
  n.sockets.dra_socket = root + "/plugins/gpu.nvidia.com/dra.sock";
  n.sockets.registration_socket = root + "/plugins_registry/gpu.nvidia.com-reg.sock";
  auto p = dra::KubeletPlugin::start(n.sockets, *n.driver);
  if (!p) return false;
  n.plugin = std::move(*p);
  return true;
}

api::NodePrepareResourcesRequest request(const std::string& uid) {
  api::NodePrepareResourcesRequest r;
  auto* c = r.add_claims();
  c->set_uid(uid);
  c->set_namespace_("default");
  c->set_name(uid);
  return r;
}

struct Case {
  const char* name;
  bool mig;
  bool shares;
  std::vector<std::pair<std::string, const char*>> claims;  // device, memory share
};

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: bench_dra_prepare [--rounds N]  (default 200 prepare/unprepare pairs per case)\n");
      return 0;
    }
  }
  spdlog::set_level(spdlog::level::warn);
  const Case cases[] = {
      {"memory share (20Gi of a whole GPU)", false, true, {{"gpu-3", "20Gi"}}},
      {"MIG create 1g.10gb (cut, then destroyed)", true, false, {{"gpu-5-mig-1g10gb-19-6", nullptr}}},
      {"MIG create 3g.40gb (cut, then destroyed)", true, false, {{"gpu-2-mig-3g40gb-9-0", nullptr}}},
  };
  std::printf("NodePrepareResources / NodeUnprepareResources through the driver's unix socket, 8 simulated\n"
              "A100-80GB, %d rounds per case; floor: GetInfo on the driver's registration socket\n\n", rounds);
  std::printf("%-44s %9s %9s %10s %10s %10s %10s %8s\n", "case", "floor_p50", "floor_p99", "prep_p50", "prep_p99",
              "unprep_p50", "unprep_p99", "p99/flr");
  bool ok = true;
  int index = 0;
  for (const auto& c : cases) {
    const std::string root = (std::filesystem::temp_directory_path() / ("tessera-bench-dra-" + std::to_string(::getpid()) + "-" +
                                                                         std::to_string(index++))).string();
    std::filesystem::remove_all(root);
    Node n;
    if (!make_node(n, root, c.mig, c.shares)) {
      std::fprintf(stderr, "%s: cannot start the driver on a simulated node\n", c.name);
      return 1;
    }
    auto dra_stub = api::DRAPlugin::NewStub(grpc::CreateChannel("unix://" + n.sockets.dra_socket, grpc::InsecureChannelCredentials()));
    auto reg_stub = pluginregistration::Registration::NewStub(
        grpc::CreateChannel("unix://" + n.sockets.registration_socket, grpc::InsecureChannelCredentials()));
    std::vector<double> floor, prep, unprep;
    for (int r = -10; r < rounds; ++r) {  // 10 warm-up rounds
      const std::string uid = "claim-" + std::to_string(r + 10);
      n.claims.objects["default/" + uid] = claim(uid, c.claims[0].first, c.claims[0].second);
      auto t = Clock::now();
      {
        grpc::ClientContext ctx;
        pluginregistration::PluginInfo info;
        ok = reg_stub->GetInfo(&ctx, {}, &info).ok() && ok;
      }
      const double f = us_since(t);
      t = Clock::now();
      api::NodePrepareResourcesResponse pr;
      {
        grpc::ClientContext ctx;
        auto st = dra_stub->NodePrepareResources(&ctx, request(uid), &pr);
        if (!st.ok() || !pr.claims().at(uid).error().empty()) {
          std::fprintf(stderr, "%s: prepare failed: %s\n", c.name,
                       st.ok() ? pr.claims().at(uid).error().c_str() : st.error_message().c_str());
          return 1;
        }
      }
      const double p = us_since(t);
      t = Clock::now();
      api::NodeUnprepareResourcesRequest ur;
      ur.add_claims()->CopyFrom(request(uid).claims(0));
      api::NodeUnprepareResourcesResponse uresp;
      {
        grpc::ClientContext ctx;
        auto st = dra_stub->NodeUnprepareResources(&ctx, ur, &uresp);
        if (!st.ok() || !uresp.claims().at(uid).error().empty()) {
          std::fprintf(stderr, "%s: unprepare failed\n", c.name);
          return 1;
        }
      }
      const double u = us_since(t);
      n.claims.objects.erase("default/" + uid);
      if (r < 0) continue;
      floor.push_back(f);
      prep.push_back(p);
      unprep.push_back(u);
    }
    const auto fs = stats(floor), ps = stats(prep), us = stats(unprep);
    std::printf("%-44s %9.0f %9.0f %10.0f %10.0f %10.0f %10.0f %8.1f\n", c.name, fs.p50, fs.p99, ps.p50, ps.p99, us.p50,
                us.p99, ps.p99 / std::max(fs.p99, 1.0));
    n.plugin->stop();
    n.plugin.reset();
    n.driver.reset();
    n.session.reset();
    std::filesystem::remove_all(root);
  }
  std::printf("\n(microseconds; each prepare reads the GPUs through NVML, writes the claim's CDI spec and the\n"
              "checkpoint before and after, fsynced; a share also writes its quota files)\n");
  return ok ? 0 : 1;
}
