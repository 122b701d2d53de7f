// The simulated CUDA driver's state: the devices configured at cuInit, the
// contexts and allocations of this process, and each device's usage, kept in
// memory or, with TESSERA_SIM_CUDA_DIR, in a file per device that every
// process using that directory updates under flock (usage_file.hpp).
//
// A C library's state, hence one per process, guarded by one mutex. A forked
// child starts afresh (uninitialised, no contexts, no allocations; its
// parent's usage stays its parent's): the simulator's rule, so that each
// process of a test is a driver client of its own.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cuda_api.hpp"
#include "gpu_models.hpp"
#include "usage_file.hpp"

#define TESSERA_CUDA_SIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace tessera_cuda_sim {

struct DeviceConfig {
  std::string uuid_text;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" or "MIG-…"
  unsigned char uuid[16] = {};
  std::uint64_t bytes = 0;
  const GpuModel* model = &default_gpu_model();  // what cuDeviceGetName/GetAttribute answer
};

// TESSERA_SIM_CUDA_DEVICES: comma-separated "UUID:SIZE[:MODEL]", SIZE decimal
// with an optional binary suffix K, M, G or T ("81920M", "40G"), MODEL a key
// or NVIDIA name of gpu_models.hpp ("A100-SXM4-80GB", "NVIDIA H200"; default
// H100-SXM5-80GB). SIZE is the device's memory whatever the model. Unset: one
// 80 GiB H100-SXM5-80GB. Empty: no device. nullopt with `why` on a malformed
// value.
std::optional<std::vector<DeviceConfig>> parse_devices(const char* text, std::string& why);

struct Context {
  CUdevice device = 0;
  bool primary = false;
  std::uint64_t overhead = 0;  // the context's own device memory while it is live (TESSERA_SIM_CUDA_CONTEXT_BYTES)
};

// A stream created with cuStreamCreate: it runs on its context's device.
struct Graph;
struct Stream {
  Context* ctx = nullptr;
  Graph* capture = nullptr;  // the graph being captured into, while capturing
};

// A loaded module (exports_graph.cpp): context-bound device memory.
struct Module {
  Context* ctx = nullptr;
  std::uint64_t bytes = 0;
};

// Graphs ([CH] graph memory nodes; exports_graph.cpp). Only memory nodes are
// modelled: an allocation node picks its address at creation; an executable
// graph maps its allocation nodes' memory (each rounded up to a granule) at
// its first upload or launch and keeps it until it is destroyed or the
// device's graph memory is trimmed while none of its allocations is
// outstanding. A launch makes each allocation outstanding until a free node
// of the graph or a cuMemFree(Async) of its address; an outstanding one
// outlives its exec and is released when freed.
inline constexpr int kGraphNodeMemAlloc = 10;  // [CH] CU_GRAPH_NODE_TYPE_MEM_ALLOC
inline constexpr int kGraphNodeMemFree = 11;   // [CH] CU_GRAPH_NODE_TYPE_MEM_FREE
struct GraphNode {
  int type = 0;
  CUdevice device = 0;
  std::uint64_t bytes = 0;
  CUdeviceptr dptr = 0;
};
struct Graph {
  std::vector<GraphNode*> nodes;
};
struct GraphExec {
  const Graph* source = nullptr;
  std::vector<GraphNode> allocs;  // copies: the graph may be destroyed
  std::vector<CUdeviceptr> frees;
  unsigned long long flags = 0;
  bool mapped = false;
};
struct GraphAllocation {  // an outstanding graph allocation
  GraphExec* exec = nullptr;  // nullptr once its exec is destroyed
  CUdevice device = 0;
  std::uint64_t bytes = 0;    // as mapped: rounded up to a granule
};
struct GraphPool {  // per device: [CH] CUgraphMem_attribute
  std::uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
};

// A stream-ordered pool (exports_pool.cpp). Reserved memory is what the pool
// holds from the device, in granules; used memory is what its outstanding
// allocations hold of that.
struct Pool {
  CUdevice device = 0;
  bool is_default = false;
  bool destroyed = false;  // cuMemPoolDestroy'd; lives on while allocations are outstanding
  std::uint64_t max_size = 0;  // CUmemPoolProps.maxSize; 0: no limit
  std::uint64_t threshold = 0;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD ([CH] default 0)
  std::uint64_t reserved = 0, reserved_high = 0, used = 0, used_high = 0;
  int reuse[3] = {1, 1, 1};  // the three REUSE_* attributes ([CH] default enabled)
};

// Memory a pointer names: cuMemAlloc/AllocPitch/AllocManaged (context-bound,
// `ctx` set) or a pool allocation (`pool` set, no context).
struct Allocation {
  CUdevice device = 0;
  Context* ctx = nullptr;
  std::uint64_t bytes = 0;
  Pool* pool = nullptr;
};

// cuMemCreate's physical memory (exports_vmm.cpp): alive while a handle
// holds a reference to it or a mapping uses it.
struct Physical {
  CUdevice device = 0;
  bool device_memory = false;  // charged: a CU_MEM_LOCATION_TYPE_DEVICE location
  std::uint64_t bytes = 0;
  int handle_types = 0;  // CUmemAllocationProp.requestedHandleTypes
  unsigned refs = 0;     // references held through its handles (create, retain, import)
  unsigned mappings = 0;
};

// A CUmemGenericAllocationHandle: one allocation, and the references taken
// through this handle value (cuMemCreate or an import: 1; each
// cuMemRetainAllocationHandle: +1; each cuMemRelease: -1). A handle with no
// reference left stays known while its memory is mapped, so that a retain of
// a mapped address answers "the same handle value used to map the memory".
struct HandleRef {
  std::uint64_t physical = 0;
  unsigned refs = 0;
};

struct Mapping {
  std::uint64_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
  int access = 0;  // CUmemAccess_flags last set for the mapping (cuMemSetAccess)
};

// A library (cuLibraryLoad*): context-independent; sim: loaded at once into
// each context of the process that is live then (as CUDA_MODULE_LOADING=EAGER
// does for current contexts), one module per context.
struct Library {
  std::vector<std::uintptr_t> modules;
};

// A CUDA array or mipmapped array (exports_array.cpp): context-bound.
struct ArrayRecord {
  CUdevice device = 0;
  Context* ctx = nullptr;
  std::uint64_t bytes = 0;
  bool mipmapped = false;
};

// The simulator's granule: pools reserve, and VMM sizes and addresses align,
// in 2 MiB (design §5; sim's cuMemGetAllocationGranularity answer).
inline constexpr std::uint64_t kGranule = 2ULL << 20;

struct Usage {
  std::uint64_t process = 0, device = 0, peak = 0;
};

class Driver {
 public:
  std::mutex mu;

  bool initialized = false;
  std::uint64_t generation = 1;  // bumped in a forked child; stales every thread's context stack
  std::vector<DeviceConfig> devices;

  // The context current to the calling thread, if any and still alive.
  Context* current();
  std::vector<Context*>& thread_stack();
  bool is_live(Context* c) const { return live_.contains(c); }

  CUresult init();  // reads the environment; caller holds mu
  // A new context on `dev`, its own memory charged (OUT_OF_MEMORY past the device's).
  CUresult create_context(CUdevice dev, Context*& out);
  Context* primary(CUdevice dev);  // the device's primary context object (not necessarily active)
  unsigned& primary_refs(CUdevice dev) { return primary_refs_[static_cast<std::size_t>(dev)]; }
  CUresult activate(Context* c);  // makes a (primary) context live, charging its own memory
  // Frees every allocation of `c` and makes it invalid.
  CUresult destroy_context(Context* c);

  // Charges `bytes` on `ctx`'s device and returns a new address: below 4 GiB
  // for the 32-bit ABIs. OUT_OF_MEMORY past the device's memory.
  CUresult allocate(Context* ctx, std::uint64_t bytes, bool low, CUdeviceptr& out);
  CUresult free(CUdeviceptr p);
  CUresult usage(CUdevice dev, Usage& u);
  // Whether [p, p + n) lies inside one block of memory this process holds.
  bool owns_range(CUdeviceptr p, std::uint64_t n) const;
  // A stream or context synchronize: every pool of the process releases what
  // its release threshold does not keep.
  CUresult synchronize();

  // Stream-ordered pools. The caller holds mu and has validated arguments.
  Pool* default_pool(CUdevice dev);
  Pool* current_pool(CUdevice dev) {
    Pool* p = current_pool_[static_cast<std::size_t>(dev)];
    return p ? p : default_pool(dev);
  }
  void set_current_pool(CUdevice dev, Pool* p) { current_pool_[static_cast<std::size_t>(dev)] = p; }
  Pool* create_pool(CUdevice dev, std::uint64_t max_size);
  Pool* usable_pool(CUmemoryPool h) const;  // NULL unless a live, not destroyed pool of this process
  CUresult pool_allocate(Pool* p, std::uint64_t bytes, CUdeviceptr& out);
  CUresult pool_trim(Pool* p, std::uint64_t keep_at_least);
  CUresult pool_destroy(Pool* p);

  // Virtual memory management.
  CUresult vmm_create(CUdevice dev, bool device_memory, std::uint64_t bytes, int handle_types,
                      CUmemGenericAllocationHandle& out);
  CUresult vmm_release(CUmemGenericAllocationHandle h);
  CUresult vmm_reserve(std::uint64_t size, std::uint64_t alignment, CUdeviceptr& out);
  CUresult vmm_address_free(CUdeviceptr p, std::uint64_t size);
  CUresult vmm_map(CUdeviceptr p, std::uint64_t size, CUmemGenericAllocationHandle h);
  CUresult vmm_unmap(CUdeviceptr p, std::uint64_t size);
  CUresult vmm_set_access(CUdeviceptr p, std::uint64_t size, const CUmemAccessDesc* desc, std::size_t count);
  CUresult vmm_retain(CUdeviceptr addr, CUmemGenericAllocationHandle& out);
  CUresult vmm_export(CUmemGenericAllocationHandle h, CUmemAllocationHandleType type, int& fd);
  CUresult vmm_import(int fd, CUmemGenericAllocationHandle& out);

  // Arrays; `handle` is the CUarray or CUmipmappedArray value.
  CUresult array_create(Context* ctx, std::uint64_t bytes, bool mipmapped, std::uintptr_t& handle);
  CUresult array_destroy(std::uintptr_t handle, bool mipmapped);

  // Streams, modules and graphs (exports_graph.cpp). The caller holds mu.
  Stream* create_stream(Context* ctx);
  Stream* stream(CUstream s) const;  // NULL unless a live stream of this process
  void destroy_stream(Stream* s) { live_streams_.erase(s); }
  CUresult module_load(Context* ctx, std::uintptr_t& handle);
  CUresult module_unload(std::uintptr_t handle);
  CUresult library_load(std::uintptr_t& handle);
  CUresult library_unload(std::uintptr_t handle);
  bool is_library(std::uintptr_t handle) const { return libraries_.contains(handle); }
  Graph* create_graph();
  Graph* graph(void* handle) const;  // NULL unless live
  void destroy_graph(Graph* g);
  GraphNode* node(void* handle) const;  // NULL unless a node of a live graph
  GraphNode* add_node(Graph* g, const GraphNode& n);
  bool is_graph_allocation(CUdeviceptr p) const;  // an address some allocation node chose
  CUdeviceptr graph_addresses(std::uint64_t bytes);
  GraphExec* instantiate(const Graph& g, unsigned long long flags);
  // Whether a live exec of `g` holds allocation nodes ([CH]: a graph with
  // memory nodes has at most one executable graph at a time).
  bool has_memory_exec(const Graph& g) const;
  GraphExec* exec(void* handle) const;  // NULL unless live
  CUresult graph_upload(GraphExec* e);
  CUresult graph_launch(GraphExec* e);
  CUresult exec_destroy(GraphExec* e);
  CUresult graph_trim(CUdevice dev);
  GraphPool& graph_pool(CUdevice dev) { return graph_pools_[static_cast<std::size_t>(dev)]; }
  std::uint64_t pool_step() const { return pool_step_; }
  std::uint64_t load_us() const { return load_us_; }

  void reset_after_fork();

 private:
  CUresult charge(CUdevice dev, std::int64_t delta, Usage* u);
  CUresult pool_release_to(Pool* p, std::uint64_t keep);
  CUresult physical_maybe_free(std::uint64_t id);
  HandleRef* live_handle(CUmemGenericAllocationHandle h);  // NULL unless it holds a reference
  using MappingIt = std::map<CUdeviceptr, Mapping>::iterator;
  // The run of whole adjacent mappings [first, last) that covers [p, p + size)
  // exactly, the first starting at p; false when there is none (cuMemUnmap's
  // and cuMemSetAccess's rule; sim: several mappings in one call).
  bool whole_mappings(CUdeviceptr p, std::uint64_t size, MappingIt& first, MappingIt& last);
  CUdeviceptr take_addresses(std::uint64_t bytes, std::uint64_t alignment);
  CUresult graph_map(GraphExec* e);
  bool graph_free(CUdeviceptr p, CUresult& result);  // a graph allocation's free; false when not one

  // Knobs read at cuInit (design §5: the paths a test must be able to hit).
  std::uint64_t pool_step_ = kGranule;  // TESSERA_SIM_CUDA_POOL_STEP: a pool grows and shrinks by this
  std::uint64_t context_bytes_ = 0;     // TESSERA_SIM_CUDA_CONTEXT_BYTES: each context's own memory
  std::uint64_t module_bytes_ = 0;      // TESSERA_SIM_CUDA_MODULE_BYTES: each module's memory
  std::uint64_t load_us_ = 0;           // TESSERA_SIM_CUDA_LOAD_US: how long a module load takes, in µs
  std::vector<std::unique_ptr<Stream>> streams_;  // never freed: a stale handle never aliases a new one
  std::set<Stream*> live_streams_;
  std::map<std::uintptr_t, Module> modules_;
  std::uintptr_t next_module_ = 0xb0000000;
  std::vector<std::unique_ptr<Graph>> graphs_;
  std::set<Graph*> live_graphs_;
  std::vector<std::unique_ptr<GraphNode>> nodes_;
  std::map<GraphNode*, Graph*> node_graph_;
  std::set<CUdeviceptr> graph_addresses_;  // every address an allocation node chose
  std::vector<std::unique_ptr<GraphExec>> execs_;
  std::set<GraphExec*> live_execs_;
  std::map<CUdeviceptr, GraphAllocation> graph_live_;
  std::vector<GraphPool> graph_pools_;  // per device

  std::string dir_;
  std::vector<std::unique_ptr<Context>> contexts_;  // never freed: a stale handle never aliases a new one
  std::set<Context*> live_;
  std::vector<Context*> primary_;
  std::vector<unsigned> primary_refs_;
  std::map<CUdeviceptr, Allocation> allocations_;
  std::vector<std::unique_ptr<Pool>> pools_;  // never freed: a stale handle never aliases a new one
  std::set<Pool*> live_pools_;                // created and not yet gone (destroyed ones wait here for their frees)
  std::vector<Pool*> default_pool_, current_pool_;  // per device
  std::map<std::uint64_t, Physical> physical_;
  std::uint64_t next_physical_ = 1;
  std::map<CUmemGenericAllocationHandle, HandleRef> handles_;
  CUmemGenericAllocationHandle next_handle_ = 0x1000;
  std::map<std::uintptr_t, Library> libraries_;
  std::uintptr_t next_library_ = 0xc0000000;
  std::map<CUdeviceptr, std::uint64_t> reservations_;  // base → size
  std::map<CUdeviceptr, Mapping> mappings_;
  std::map<std::uintptr_t, ArrayRecord> arrays_;
  std::set<std::uintptr_t> orphaned_arrays_;  // freed with their context
  std::uintptr_t next_array_ = 0xa0000000;
  std::vector<std::uint64_t> own_, peak_;  // per device; peak_ only without a directory
  std::vector<UsageFile> files_;           // per device, with a directory
  CUdeviceptr next_high_ = 0x00007f0000000000ULL, next_low_ = 0x10000000ULL;
};

Driver& driver();

}  // namespace tessera_cuda_sim
