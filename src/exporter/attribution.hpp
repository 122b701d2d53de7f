// Which container holds which device, from the kubelet's pod-resources List:
// whole GPUs and MIG devices by UUID, shared replicas by their advertised id
// "<uuid>::<n>". Replica memory comes from each container's quota ledger.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "exporter/sample.hpp"
#include "plugin/pod_resources.hpp"

namespace tessera::exporter {

// The replicas one container holds of one device, with what identifies its
// ledger: `<ledger root>/sharing::ledger_key(resource, resource_ids)`.
struct ReplicaHolding {
  Owner owner;
  std::string device_uuid;               // the GPU or MIG device the replicas share
  std::vector<std::string> replica_ids;  // this container's replicas of that device, sorted
  std::string resource;
  std::vector<std::string> resource_ids;  // every id the container holds of `resource`
};

struct Attribution {
  std::map<std::string, Owner> devices;  // GPU or MIG UUID held whole -> its container
  std::vector<ReplicaHolding> replicas;
};

// Only resources starting with `resource_prefix` count (nvidia.com/ by default).
Attribution attribute(const std::vector<plugin::PodDevices>& pods, const std::string& resource_prefix);

// "<uuid>::<n>" -> "<uuid>"; empty for an id that names no replica.
std::string replica_device(const std::string& id);

}  // namespace tessera::exporter
