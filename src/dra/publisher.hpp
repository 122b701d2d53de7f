// The DRA driver's face to the API server: the node's ResourceSlices kept
// equal to the driver's pool (created, replaced, stale ones deleted, each
// change under a new pool generation), and ResourceClaims read at prepare.
#pragma once

#include <nlohmann/json.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "dra/driver.hpp"
#include "dra/slices.hpp"
#include "kube/client.hpp"

namespace tessera::dra {

class Publisher {
 public:
  Publisher(kube::Client& client, PoolSpec spec) : client_(client), spec_(std::move(spec)) {}

  // Publishes `pool` unless it is what was published last. The first call
  // reads the slices already there (a restart) and continues their
  // generations. Errors name the slice and the API's answer; the next call
  // tries again from what the API holds.
  [[nodiscard]] Result<void> publish(const PoolState& pool);
  // Deletes every slice of this driver on this node (the driver is going away for good).
  [[nodiscard]] Result<void> remove_all();

  int64_t generation() const { return spec_.generation; }
  // False once the API server was seen dropping the partitionable fields
  // (sharedCounters, consumesCounters, allowMultipleAllocations) from a slice
  // it stored, or refusing a slice that has them (422 Invalid): from then on only whole GPUs and existing MIG instances are
  // published (sharing::dra::without_partitions), with one warning and one
  // Node Event saying why.
  bool partitionable() const { return partitionable_; }
  const std::string& fallback_reason() const { return fallback_reason_; }

  // Prometheus text of the publications so far (tessera_dra_resourceslice_*,
  // tessera_dra_partitionable_devices); safe from any thread, as /metrics reads it.
  std::string metrics_text() const;

 private:
  Result<void> publish_pool(const PoolState& pool);
  Result<std::vector<nlohmann::json>> list();
  Result<void> publish_devices(const std::vector<sharing::dra::CounterSet>& counter_sets,
                               const std::vector<sharing::dra::Device>& devices);
  void fall_back(const std::string& why);
  bool refused_partitions(const SliceChange& change, const kube::ApiError& error);

  kube::Client& client_;
  PoolSpec spec_;
  bool synced_ = false;  // last_ is what the API holds
  std::vector<nlohmann::json> last_;          // the slices as the API returned them
  std::vector<nlohmann::json> last_desired_;  // what they were built from, at this generation
  bool partitionable_ = true;
  std::string fallback_reason_;
  // What metrics_text() reads, copied under its lock after each publish().
  mutable std::mutex stats_mutex_;
  struct {
    uint64_t ok = 0, failed = 0;
    int64_t generation = 0;
    bool partitionable = true, in_sync = false;
  } stats_;
};

// The partitionable fields `sent` had and `stored` (the API server's answer)
// lacks, as their paths ("spec.sharedCounters", "devices[3].consumesCounters",
// ...); empty when the server kept them all.
std::vector<std::string> dropped_fields(const nlohmann::json& sent, const nlohmann::json& stored);

class ApiClaimSource final : public ClaimSource {
 public:
  explicit ApiClaimSource(kube::Client& client) : client_(client) {}
  Result<nlohmann::json> get_claim(const std::string& claim_namespace, const std::string& name) override;

 private:
  kube::Client& client_;
};

}  // namespace tessera::dra
