// The DRA driver's node side, apart from its transports: what the node's
// ResourceSlices hold (from NVML, the checkpoint and sharing/dra's model),
// and preparing and unpreparing claims: cutting the MIG instance the
// scheduler chose (through the reconciler's operations), writing the
// claim's CDI spec, a memory share's quota files, and the checkpoint before
// and after every change. The gRPC services (dra/kubelet_plugin) and the
// API-server publisher (dra/publisher) call it; tests call it directly.
//
// Prepare is all or nothing per claim: when any step fails, what this
// prepare cut is destroyed again, the claim is not recorded as prepared,
// and the error says why; other claims are untouched. A retry starts over.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "dra/checkpoint.hpp"
#include "dra/claim.hpp"
#include "mps/daemons.hpp"
#include "nvml/session.hpp"
#include "plugin/cdi_writer.hpp"
#include "sharing/allocate.hpp"
#include "sharing/dra.hpp"
#include "sharing/health.hpp"

namespace tessera::dra {

struct DriverOptions {
  std::string driver = sharing::dra::kDefaultDriver;
  std::string node;
  std::string node_uid;
  std::string state_dir;  // holds checkpoint.json (by default <the plugin's directory>/tessera)
  // The kernel's boot id (not namespaced: a container reads the host's). A
  // checkpoint written in another boot is started over. Empty or unreadable:
  // reboots are not noticed (said at start).
  std::string boot_id_file = "/proc/sys/kernel/random/boot_id";
  // CDI: one transient spec per claim, "<vendor>-<class>_<claim uid>.json",
  // devices "<claim uid>-<device>" (NVIDIA's driver: vendor k8s.gpu.nvidia.com, class claim).
  plugin::CdiOptions cdi;
  std::string cdi_class = "claim";
  sharing::dra::Order order = sharing::dra::Order::tessera;
  bool memory_shares = false;  // devices allow many claims, each with its `memory` share
  // How they ask for it (NVIDIA's consumable-shares modes). A claim holding
  // no memory (unlimited and counted shares allow 0) gets no quota.
  sharing::dra::SharesMode shares;
  // Turn MIG mode on (or off, for a whole-GPU claim) at prepare on GPUs that
  // change it without a reset (Hopper and newer); elsewhere a GPU is served
  // in the mode it is in.
  bool switch_mig_mode = true;
  sharing::QuotaLibrarySettings quota;
  sharing::HealthPolicy health;
  // MPS for the claims whose config asks for it (`sharing: {strategy: MPS}`,
  // on a whole GPU or inside a MIG instance): one control daemon per device,
  // owned by `daemons` (a Supervisor in this process, or tessera mps-host's
  // client); null: such claims are refused, saying how to run the driver.
  mps::Daemons* daemons = nullptr;
  std::string mps_root = "/run/nvidia/mps";
  std::chrono::milliseconds mps_start_timeout{15000};  // a prepare waits this long for its daemon
  // NVIDIA's TimeSlicingConfig interval: `nvidia_smi compute-policy -i <GPU
  // UUID> --set-timeslice <level>` (a path, or a name looked up on PATH; run
  // with the NVML library's directory on LD_LIBRARY_PATH). Empty: claims that
  // name an interval are refused.
  std::string nvidia_smi = "nvidia-smi";
  // Where sysfs is (each GPU's PCIe root and NUMA node: the standard
  // attributes resource.kubernetes.io/pcieRoot and numaNode). Empty: not read.
  std::string sysfs = "/sys";
  std::chrono::milliseconds nvidia_smi_timeout{10000};
};

// Where ResourceClaims come from (the API server; tests give their own).
class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  [[nodiscard]] virtual Result<nlohmann::json> get_claim(const std::string& claim_namespace, const std::string& name) = 0;
};

struct ClaimRef {
  std::string uid;
  std::string claim_namespace;
  std::string name;
};

struct PreparedDevice {
  std::vector<std::string> requests;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_ids;
  std::optional<std::string> share_id;
};

struct PrepareOutcome {
  std::vector<PreparedDevice> devices;
  std::string error;  // non-empty: this claim failed
};

// What the pool's slices hold now.
struct PoolState {
  std::vector<sharing::dra::CounterSet> counter_sets;
  std::vector<sharing::dra::Device> devices;
  uint64_t version = 0;  // changes whenever the above may have changed
};

class Driver {
 public:
  // Reads the GPUs and the checkpoint; adopts the instances it names, takes
  // up an interrupted destroy, and reports every MIG instance it did not cut
  // (served as it is). Errors: NVML cannot be read, or the checkpoint cannot
  // be read or is another node's or driver's.
  [[nodiscard]] static Result<std::unique_ptr<Driver>> start(const nvml::Session& session, DriverOptions options,
                                                             ClaimSource& claims);

  std::map<std::string, PrepareOutcome> prepare(const std::vector<ClaimRef>& claims);
  // Per claim UID: empty when done (also for a claim never prepared).
  std::map<std::string, std::string> unprepare(const std::vector<ClaimRef>& claims);

  PoolState pool() const;
  // The pool's name in the slices and the kubelet's calls: the node's.
  const std::string& pool_name() const { return options_.node; }

  // Health from NVML's events (plugin::EventWatch's sink), and the periodic
  // recovery check; both change the pool's taints.
  void record_health(const sharing::HealthEvent& event);
  void recover_health();
  // Reads NVML again (MIG instances someone else made or destroyed).
  [[nodiscard]] Result<void> refresh();

  // Called (outside the driver's lock) whenever the pool changed.
  void on_change(std::function<void()> callback);

  // Prometheus text (version 0.0.4) of the driver's work since it started:
  // prepares and unprepares by result, their per-claim latency, the claims
  // prepared now, MIG instances cut and destroyed, and the instances it
  // holds. docs/metrics.md lists them.
  std::string metrics_text() const;

  const std::vector<std::string>& start_report() const { return start_report_; }
  const DriverOptions& options() const { return options_; }
  Checkpoint checkpoint() const;

 private:
  Driver(const nvml::Session& session, DriverOptions options, ClaimSource& claims);

  // A MIG instance present on a GPU.
  struct Present {
    PlacedInstance placed;
    uint32_t gi_id = 0;
    uint32_t ci_id = 0;
    std::string uuid;
  };
  struct GpuNow {
    sharing::dra::Gpu gpu;
    std::vector<Present> present;
  };

  Result<void> refresh_locked();
  std::map<uint32_t, sharing::dra::Gpu::ReportedProfile> reported_profiles_locked(const sharing::dra::Gpu& gpu);
  Result<void> adopt_locked();
  // A checkpoint of an earlier boot: every claim it holds is undone (what
  // survives of it: ledgers, CDI specs on a persistent directory) and
  // forgotten, so the kubelet's prepare after the reboot cuts and writes
  // everything again.
  void forget_previous_boot_locked(const std::string& before, const std::string& now);
  // A prepared claim whose CDI spec or MIG instance is gone (deleted by
  // hand, a tmpfs emptied, an instance destroyed by someone else): false,
  // with what is missing in `why`.
  bool still_prepared_locked(const std::string& uid, const CheckpointClaim& claim, std::string& why);
  // Both run under `lock` (mutex_); prepare_one lets go of it while it waits
  // for an MPS daemon, so a slow daemon holds up only its own claim.
  PrepareOutcome prepare_one(const ClaimRef& ref, std::unique_lock<std::mutex>& lock);
  std::string unprepare_one(const ClaimRef& ref);
  // Undoes a claim's devices (instances it alone uses are destroyed) and
  // forgets it. Errors leave the instances that could not be destroyed in
  // the checkpoint as "destroying".
  Result<void> release_locked(const std::string& uid);
  Result<void> destroy_instance_locked(const std::string& device_name);
  Result<void> save_locked();
  // Tells the daemons' owner which devices need one: every device of a
  // claim that asked for MPS.
  void sync_mps_locked();
  // Every GPU's time-slice level as its claims ask, else back to the default
  // where this driver set another (recorded before it is set).
  Result<void> sync_timeslices_locked();
  std::vector<sharing::dra::Device> devices_locked() const;
  std::vector<sharing::dra::Taken> taken_locked() const;
  std::vector<sharing::dra::Taken> fixed_locked() const;
  // Instances being destroyed (a destroy that failed and waits for its retry):
  // out of the counters and never offered, so the scheduler picks nothing on their slices.
  std::vector<sharing::dra::Taken> withdrawn_locked() const;
  std::vector<sharing::dra::Taken> held_locked(const std::vector<sharing::dra::Taken>& withdrawn) const;
  const GpuNow* gpu_by_uuid(const std::string& uuid) const;
  void changed_locked();
  // The driver's files for CDI specs, read once per read of the GPUs.
  Result<sharing::DriverFiles> driver_files_locked();
  // Device taints from the health tracker (no NVML read).
  void apply_health_locked();
  // Calls the listeners when the pool changed (never under the lock).
  void notify();

  const nvml::Session& session_;
  DriverOptions options_;
  ClaimSource& claims_;
  CheckpointFile file_;
  mutable std::mutex mutex_;
  // Claims a prepare is working on while it does not hold mutex_ (waiting
  // for an MPS daemon): another prepare or unprepare of them is refused, to
  // be retried, rather than undo work still in progress.
  std::set<std::string> in_flight_;
  Checkpoint checkpoint_;
  std::vector<GpuNow> gpus_;
  // Per GPU (UUID), its MIG profiles' memory as the driver reports it, read once.
  std::map<std::string, std::map<uint32_t, sharing::dra::Gpu::ReportedProfile>> reported_profiles_;
  std::set<std::string> warned_uncatalogued_;  // GPUs (UUID) said to be unserved: MIG on, model unknown
  std::set<std::string> warned_profiles_;  // GPUs (UUID) whose MIG profiles NVML could not read
  // Counted under mutex_; read by metrics_text under it.
  static constexpr size_t kLatencyBuckets = 14;  // driver.cpp's kLatencyBounds
  struct Latency {
    std::array<uint64_t, kLatencyBuckets> buckets{};  // cumulative counts at kLatencyBounds
    uint64_t count = 0;
    double sum = 0;                 // seconds
    void observe(double seconds);
  };
  struct Counts {
    uint64_t prepared = 0, prepare_failed = 0, unprepared = 0, unprepare_failed = 0;
    uint64_t instances_cut = 0, instances_destroyed = 0;
    Latency prepare, unprepare;
  } counts_;
  std::optional<sharing::DriverFiles> files_;  // the driver's files for CDI, as of the last read
  sharing::HealthTracker health_;
  std::set<std::string> lost_;  // GPU UUIDs that fell off the bus (XID 79)
  std::map<std::string, uint64_t> last_xid_;  // by GPU UUID, or "<gpu uuid>/<gi>" for one instance
  uint64_t version_ = 1;
  std::vector<std::string> start_report_;
  std::vector<std::function<void()>> listeners_;
  bool pending_notify_ = false;
};

}  // namespace tessera::dra
