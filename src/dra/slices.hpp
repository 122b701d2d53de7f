// The ResourceSlices of one node's pool (resource.k8s.io/v1), as JSON
// values built from sharing/dra's model, and the changes that bring what the
// API server holds to them. Pure: the publisher (dra/publisher) sends them.
//
// A pool is the node (pool name = node name). Counter sets go in slices of
// their own (a slice has devices or sharedCounters, never both; at most 8
// counter sets per slice), devices in slices of at most 64 (the limit for
// devices that consume counters or carry taints), named so that the
// scheduler, which reads a pool's slices by name and each slice's devices in
// order, meets the devices in the model's order. Every change bumps the
// pool's generation: the scheduler ignores a pool until all its slices of
// the newest generation are there, so it never sees half a change.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sharing/dra.hpp"

namespace tessera::dra {

// resource.k8s.io/v1 limits (k8s.io/api resource/v1 types.go).
inline constexpr size_t kMaxCounterSetsPerSlice = 8;
inline constexpr size_t kMaxDevicesPerSliceWithCounters = 64;

struct PoolSpec {
  std::string driver = sharing::dra::kDefaultDriver;
  std::string node;
  std::string node_uid;  // for the owner reference: slices go with their Node
  int64_t generation = 1;
  bool memory_shares = false;           // devices offer `memory` to many claims
  uint64_t share_step_bytes = 1ull << 20;  // 1 MiB
  sharing::dra::SharesMode shares;      // how claims ask for it (NVIDIA's consumable-shares modes)
};

// "<node>-<driver>-counters-00", "<node>-<driver>-devices-00", ...: names the
// API accepts (a DNS subdomain of at most 253 characters; a long node name is
// cut and a hash keeps it unique).
std::string slice_name(const PoolSpec& pool, const std::string& kind, size_t index);

// The slices for `devices` (in order) and `counter_sets`.
std::vector<nlohmann::json> build_slices(const PoolSpec& pool, const std::vector<sharing::dra::CounterSet>& counter_sets,
                                         const std::vector<sharing::dra::Device>& devices);

// One device as the API writes it (for tests and the slices above).
nlohmann::json device_json(const sharing::dra::Device& device, const PoolSpec& pool);

// A quantity as the API writes it: "<n>Mi" when a whole number of MiB, else bytes.
std::string quantity(uint64_t value);

struct SliceChange {
  enum class Kind { create, update, remove } kind = Kind::create;
  std::string name;
  nlohmann::json object;  // the slice to create or the whole object to replace (PUT)
};

// What turns `existing` (the API's slices of this driver on this node) into
// `desired`: creates for new names, updates (PUT, with the existing object's
// resourceVersion) for names that exist, removals for names no longer
// wanted; creates and updates first, removals last. The publisher calls it
// only when the desired slices changed, and every change carries a new
// generation, so there is no "unchanged" case to find (the API rewrites
// quantities in canonical form, so comparing would not find it anyway).
std::vector<SliceChange> diff_slices(const std::vector<nlohmann::json>& existing, const std::vector<nlohmann::json>& desired);

}  // namespace tessera::dra
