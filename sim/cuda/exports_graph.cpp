// Context stacks, modules, created streams, stream capture and graphs with
// memory nodes ([CH] "Context Management", "Module Management", "Stream
// Management", "Graph Management"; design §5): what the quota library's
// tests need to reach a context's and a module's own memory, a stream on
// another device than the current context's, and graph memory (see
// driver.hpp for the model). Everything else about graphs (kernels, copies,
// dependencies' order, child graphs) is not simulated: dependencies are
// checked for validity and otherwise ignored.
#include <sys/stat.h>

#include <algorithm>
#include <ctime>

#include "entry.hpp"

using namespace tessera_cuda_sim;

namespace {

std::uint64_t round_up(std::uint64_t v, std::uint64_t g) { return v > UINT64_MAX - (g - 1) ? 0 : (v + g - 1) / g * g; }

}  // namespace

// ---------------------------------------------------------------- the driver's part

namespace tessera_cuda_sim {

Stream* Driver::create_stream(Context* ctx) {
  streams_.push_back(std::make_unique<Stream>());
  Stream* s = streams_.back().get();
  s->ctx = ctx;
  live_streams_.insert(s);
  return s;
}

Stream* Driver::stream(CUstream s) const {
  auto* p = reinterpret_cast<Stream*>(s);
  return live_streams_.contains(p) ? p : nullptr;
}

CUresult Driver::module_load(Context* ctx, std::uintptr_t& handle) {
  if (module_bytes_)
    if (CUresult r = charge(ctx->device, static_cast<std::int64_t>(module_bytes_), nullptr); r != CUDA_SUCCESS) return r;
  handle = next_module_;
  next_module_ += 64;  // never reused
  modules_[handle] = Module{ctx, module_bytes_};
  return CUDA_SUCCESS;
}

// [CH] "cuLibraryLoadData ... context-independent": sim: one module in each
// live context of the process (none when there is none), unloaded with the
// library or with its context.
CUresult Driver::library_load(std::uintptr_t& handle) {
  Library lib;
  for (Context* c : live_) {
    std::uintptr_t m = 0;
    if (CUresult r = module_load(c, m); r != CUDA_SUCCESS) {
      for (std::uintptr_t loaded : lib.modules) module_unload(loaded);
      return r;
    }
    lib.modules.push_back(m);
  }
  handle = next_library_;
  next_library_ += 64;  // never reused
  libraries_[handle] = std::move(lib);
  return CUDA_SUCCESS;
}

CUresult Driver::library_unload(std::uintptr_t handle) {
  auto it = libraries_.find(handle);
  if (it == libraries_.end()) return CUDA_ERROR_INVALID_HANDLE;
  CUresult result = CUDA_SUCCESS;
  for (std::uintptr_t m : it->second.modules)
    if (modules_.contains(m))
      if (CUresult r = module_unload(m); r != CUDA_SUCCESS) result = r;
  libraries_.erase(it);
  return result;
}

CUresult Driver::module_unload(std::uintptr_t handle) {
  auto it = modules_.find(handle);
  if (it == modules_.end()) return CUDA_ERROR_INVALID_HANDLE;
  const Module m = it->second;
  modules_.erase(it);
  return m.bytes ? charge(m.ctx->device, -static_cast<std::int64_t>(m.bytes), nullptr) : CUDA_SUCCESS;
}

Graph* Driver::create_graph() {
  graphs_.push_back(std::make_unique<Graph>());
  Graph* g = graphs_.back().get();
  live_graphs_.insert(g);
  return g;
}

Graph* Driver::graph(void* handle) const {
  auto* g = static_cast<Graph*>(handle);
  return live_graphs_.contains(g) ? g : nullptr;
}

void Driver::destroy_graph(Graph* g) {
  for (GraphNode* n : g->nodes) node_graph_.erase(n);
  live_graphs_.erase(g);
}

GraphNode* Driver::node(void* handle) const {
  auto* n = static_cast<GraphNode*>(handle);
  return node_graph_.contains(n) ? n : nullptr;
}

GraphNode* Driver::add_node(Graph* g, const GraphNode& n) {
  nodes_.push_back(std::make_unique<GraphNode>(n));
  GraphNode* p = nodes_.back().get();
  g->nodes.push_back(p);
  node_graph_[p] = g;
  if (n.type == kGraphNodeMemAlloc) graph_addresses_.insert(n.dptr);
  return p;
}

bool Driver::is_graph_allocation(CUdeviceptr p) const { return graph_addresses_.contains(p); }

CUdeviceptr Driver::graph_addresses(std::uint64_t bytes) { return take_addresses(bytes, kGranule); }

GraphExec* Driver::instantiate(const Graph& g, unsigned long long flags) {
  execs_.push_back(std::make_unique<GraphExec>());
  GraphExec* e = execs_.back().get();
  e->flags = flags;
  e->source = &g;
  for (const GraphNode* n : g.nodes) {
    if (n->type == kGraphNodeMemAlloc) e->allocs.push_back(*n);
    else if (n->type == kGraphNodeMemFree) e->frees.push_back(n->dptr);
  }
  live_execs_.insert(e);
  return e;
}

bool Driver::has_memory_exec(const Graph& g) const {
  for (const GraphExec* e : live_execs_)
    if (e->source == &g && !e->allocs.empty()) return true;
  return false;
}

GraphExec* Driver::exec(void* handle) const {
  auto* e = static_cast<GraphExec*>(handle);
  return live_execs_.contains(e) ? e : nullptr;
}

// Maps an exec's allocations: each device is charged what they take.
CUresult Driver::graph_map(GraphExec* e) {
  if (e->mapped) return CUDA_SUCCESS;
  std::vector<std::pair<CUdevice, std::uint64_t>> charged;
  for (const GraphNode& a : e->allocs) {
    const std::uint64_t bytes = round_up(a.bytes, kGranule);
    if (CUresult r = charge(a.device, static_cast<std::int64_t>(bytes), nullptr); r != CUDA_SUCCESS) {
      for (const auto& [dev, b] : charged) {
        charge(dev, -static_cast<std::int64_t>(b), nullptr);
        graph_pool(dev).reserved -= b;
      }
      return r;
    }
    charged.emplace_back(a.device, bytes);
    GraphPool& p = graph_pool(a.device);
    p.reserved += bytes;
    p.reserved_high = std::max(p.reserved_high, p.reserved);
  }
  e->mapped = true;
  return CUDA_SUCCESS;
}

CUresult Driver::graph_upload(GraphExec* e) { return graph_map(e); }

// sim: a launch completes at once. Its allocations become outstanding, its
// free nodes free theirs. An allocation still outstanding from the last
// launch is freed first with AUTO_FREE_ON_LAUNCH, else the launch is refused
// (INVALID_VALUE; [CH] leaves relaunching over unfreed allocations an error).
CUresult Driver::graph_launch(GraphExec* e) {
  for (const GraphNode& a : e->allocs)
    if (graph_live_.contains(a.dptr) && !(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
      return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = graph_map(e); r != CUDA_SUCCESS) return r;
  for (const GraphNode& a : e->allocs) {
    CUresult ignored = CUDA_SUCCESS;
    if (graph_live_.contains(a.dptr)) graph_free(a.dptr, ignored);
    const std::uint64_t bytes = round_up(a.bytes, kGranule);
    graph_live_[a.dptr] = GraphAllocation{e, a.device, bytes};
    GraphPool& p = graph_pool(a.device);
    p.used += bytes;
    p.used_high = std::max(p.used_high, p.used);
  }
  for (CUdeviceptr f : e->frees) {
    CUresult ignored = CUDA_SUCCESS;
    graph_free(f, ignored);
  }
  return CUDA_SUCCESS;
}

bool Driver::graph_free(CUdeviceptr p, CUresult& result) {
  auto it = graph_live_.find(p);
  if (it == graph_live_.end()) {
    if (!graph_addresses_.contains(p)) return false;
    result = CUDA_ERROR_INVALID_VALUE;  // a graph's address with nothing outstanding there
    return true;
  }
  const GraphAllocation a = it->second;
  graph_live_.erase(it);
  GraphPool& pool = graph_pool(a.device);
  pool.used -= a.bytes;
  result = CUDA_SUCCESS;
  if (!a.exec) {  // its exec is gone: nothing keeps the memory now
    pool.reserved -= a.bytes;
    result = charge(a.device, -static_cast<std::int64_t>(a.bytes), nullptr);
  }
  return true;
}

// Unmaps what an exec maps, but for allocations still outstanding, which
// keep their memory until freed.
CUresult Driver::exec_destroy(GraphExec* e) {
  live_execs_.erase(e);
  CUresult result = CUDA_SUCCESS;
  for (auto& [ptr, a] : graph_live_)
    if (a.exec == e) a.exec = nullptr;
  if (!e->mapped) return result;
  for (const GraphNode& n : e->allocs) {
    const std::uint64_t bytes = round_up(n.bytes, kGranule);
    auto live = graph_live_.find(n.dptr);
    if (live != graph_live_.end() && !live->second.exec) continue;  // outstanding: released when freed
    graph_pool(n.device).reserved -= bytes;
    if (CUresult r = charge(n.device, -static_cast<std::int64_t>(bytes), nullptr); r != CUDA_SUCCESS) result = r;
  }
  e->mapped = false;
  return result;
}

// [CH] cuDeviceGraphMemTrim frees memory no graph is using: sim, the
// mappings of execs with an allocation on `dev` and none outstanding.
CUresult Driver::graph_trim(CUdevice dev) {
  CUresult result = CUDA_SUCCESS;
  for (GraphExec* e : live_execs_) {
    if (!e->mapped) continue;
    bool on_dev = false, busy = false;
    for (const GraphNode& a : e->allocs) {
      on_dev = on_dev || a.device == dev;
      auto live = graph_live_.find(a.dptr);
      busy = busy || (live != graph_live_.end() && live->second.exec == e);
    }
    if (!on_dev || busy) continue;
    for (const GraphNode& a : e->allocs) {
      const std::uint64_t bytes = round_up(a.bytes, kGranule);
      graph_pool(a.device).reserved -= bytes;
      if (CUresult r = charge(a.device, -static_cast<std::int64_t>(bytes), nullptr); r != CUDA_SUCCESS) result = r;
    }
    e->mapped = false;
  }
  return result;
}

}  // namespace tessera_cuda_sim

// ---------------------------------------------------------------- entry points

namespace {

CUresult push_current(CUcontext ctx) {
  return initialized([&](Driver& d) {
    auto* c = reinterpret_cast<Context*>(ctx);
    if (!c || !d.is_live(c)) return CUDA_ERROR_INVALID_CONTEXT;
    d.thread_stack().push_back(c);
    return CUDA_SUCCESS;
  });
}

// [CH] pops the calling thread's current context; INVALID_CONTEXT with none. pctx may be NULL.
CUresult pop_current(CUcontext* pctx) {
  return initialized([&](Driver& d) {
    auto& s = d.thread_stack();
    if (s.empty()) return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx) *pctx = reinterpret_cast<CUcontext>(s.back());
    s.pop_back();
    return CUDA_SUCCESS;
  });
}

// sim: a module is any image (the driver would parse it); it holds
// TESSERA_SIM_CUDA_MODULE_BYTES of the current context's device until it is
// unloaded or its context destroyed.
// TESSERA_SIM_CUDA_LOAD_US: a load's time, spent before its memory is taken
// and outside the driver's lock (other threads' calls go on meanwhile).
void take_load_time() {
  std::uint64_t us = 0;
  if (initialized([&](Driver& d) {
        us = d.load_us();
        return CUDA_SUCCESS;
      }) != CUDA_SUCCESS || us == 0)
    return;
  const timespec pause{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  nanosleep(&pause, nullptr);
}

CUresult load(CUmodule* module, bool has_image) {
  if (module && has_image) take_load_time();
  return initialized([&](Driver& d) {
    if (!module || !has_image) return CUDA_ERROR_INVALID_VALUE;
    Context* c = d.current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    std::uintptr_t h = 0;
    if (CUresult r = d.module_load(c, h); r != CUDA_SUCCESS) return r;
    *module = reinterpret_cast<CUmodule>(h);
    return CUDA_SUCCESS;
  });
}

CUresult stream_destroy(CUstream s) {
  return initialized([&](Driver& d) {
    Stream* st = d.stream(s);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    d.destroy_stream(st);
    return CUDA_SUCCESS;
  });
}

// [CH] the legacy stream cannot be captured (sim: nor NULL or the per-thread
// handle: no stream but a created one); a stream captures one graph at a time.
CUresult begin_capture(CUstream s, int mode) {
  return initialized([&](Driver& d) {
    if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
    Stream* st = d.stream(s);
    if (!st) return s == nullptr || s == TESSERA_CU_STREAM_LEGACY || s == TESSERA_CU_STREAM_PER_THREAD
                        ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                        : CUDA_ERROR_INVALID_VALUE;
    if (st->capture) return CUDA_ERROR_ILLEGAL_STATE;
    st->capture = d.create_graph();
    return CUDA_SUCCESS;
  });
}

template <class Call>
CUresult with_graph(CUgraph g, Call&& call) {
  return initialized([&](Driver& d) {
    Graph* graph = d.graph(g);
    if (!graph) return CUDA_ERROR_INVALID_VALUE;
    return call(d, *graph);
  });
}

bool valid_dependencies(const Driver& d, const CUgraphNode* deps, std::size_t n) {
  if (n && !deps) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (!d.node(deps[i])) return false;
  return true;
}

CUresult instantiate(CUgraphExec* exec, CUgraph g, unsigned long long flags, CUstream upload) {
  return with_graph(g, [&](Driver& d, Graph& graph) {
    if (!exec) return CUDA_ERROR_INVALID_VALUE;
    constexpr unsigned long long kKnown = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                          CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                                          CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    if (flags & ~kKnown) return CUDA_ERROR_INVALID_VALUE;  // sim: device launch is not modelled
    Context* c = nullptr;
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
      if (CUresult r = stream_context(d, upload, c); r != CUDA_SUCCESS) return r;
    if (d.has_memory_exec(graph)) return CUDA_ERROR_NOT_SUPPORTED;  // sim's code for [CH]'s rule
    GraphExec* e = d.instantiate(graph, flags);
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
      if (CUresult r = d.graph_upload(e); r != CUDA_SUCCESS) {
        d.exec_destroy(e);
        return r;
      }
    *exec = reinterpret_cast<CUgraphExec>(e);
    return CUDA_SUCCESS;
  });
}

template <class Call>
CUresult on_exec(CUgraphExec exec, CUstream s, Call&& call) {
  return initialized([&](Driver& d) {
    GraphExec* e = d.exec(exec);
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    Context* c = nullptr;
    if (CUresult r = stream_context(d, s, c); r != CUDA_SUCCESS) return r;
    if (capture_of(d, s)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // sim: no child graphs
    return call(d, e);
  });
}

// [CH] cuModuleLoad, cuLibraryLoadFromFile: FILE_NOT_FOUND when the file
// cannot be opened (after NOT_INITIALIZED); CUDA_SUCCESS for a file there or
// no name (the caller's own INVALID_VALUE).
CUresult file_to_load(const char* path) {
  struct stat st {};
  if (!path || ::stat(path, &st) == 0) return CUDA_SUCCESS;
  CUresult r = initialized([](Driver&) { return CUDA_SUCCESS; });
  return r != CUDA_SUCCESS ? r : CUDA_ERROR_FILE_NOT_FOUND;
}

}  // namespace

TESSERA_CUDA_SIM_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) {
  TESSERA_CUDA_SIM_COUNT();
  return push_current(ctx);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  TESSERA_CUDA_SIM_COUNT();
  return push_current(ctx);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxPopCurrent(CUcontext* pctx) {
  TESSERA_CUDA_SIM_COUNT();
  return pop_current(pctx);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  TESSERA_CUDA_SIM_COUNT();
  return pop_current(pctx);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  TESSERA_CUDA_SIM_COUNT();
  if (CUresult r = file_to_load(fname); r != CUDA_SUCCESS) return r;
  return load(module, fname != nullptr);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  TESSERA_CUDA_SIM_COUNT();
  return load(module, image != nullptr);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions,
                                                    CUjit_option* options, void** optionValues) {
  TESSERA_CUDA_SIM_COUNT();
  if (numOptions && (!options || !optionValues)) return CUDA_ERROR_INVALID_VALUE;
  return load(module, image != nullptr);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  TESSERA_CUDA_SIM_COUNT();
  return load(module, fatCubin != nullptr);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuModuleUnload(CUmodule hmod) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) { return d.module_unload(reinterpret_cast<std::uintptr_t>(hmod)); });
}

// [CH] cuLibraryLoad*: the options' counts need their arrays; a file that
// cannot be opened is FILE_NOT_FOUND (file_to_load). No current context is needed.
namespace {
CUresult library_load(CUlibrary* library, bool have_code, CUjit_option* jitOptions, void** jitOptionsValues,
                      unsigned numJitOptions, CUlibraryOption* libraryOptions, void** libraryOptionValues,
                      unsigned numLibraryOptions) {
  if (library && have_code) take_load_time();
  return initialized([&](Driver& d) {
    if (!library || !have_code) return CUDA_ERROR_INVALID_VALUE;
    if ((numJitOptions && (!jitOptions || !jitOptionsValues)) ||
        (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
      return CUDA_ERROR_INVALID_VALUE;
    std::uintptr_t h = 0;
    if (CUresult r = d.library_load(h); r != CUDA_SUCCESS) return r;
    *library = reinterpret_cast<CUlibrary>(h);
    return CUDA_SUCCESS;
  });
}
}  // namespace

TESSERA_CUDA_SIM_EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions,
                                                   void** jitOptionsValues, unsigned int numJitOptions,
                                                   CUlibraryOption* libraryOptions, void** libraryOptionValues,
                                                   unsigned int numLibraryOptions) {
  TESSERA_CUDA_SIM_COUNT();
  return library_load(library, code != nullptr, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                      libraryOptionValues, numLibraryOptions);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName,
                                                       CUjit_option* jitOptions, void** jitOptionsValues,
                                                       unsigned int numJitOptions, CUlibraryOption* libraryOptions,
                                                       void** libraryOptionValues, unsigned int numLibraryOptions) {
  TESSERA_CUDA_SIM_COUNT();
  if (CUresult r = file_to_load(fileName); r != CUDA_SUCCESS) return r;
  return library_load(library, fileName != nullptr, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                      libraryOptionValues, numLibraryOptions);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuLibraryUnload(CUlibrary library) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) { return d.library_unload(reinterpret_cast<std::uintptr_t>(library)); });
}
// sim: any non-empty name is a kernel of the library (the code is not read);
// the kernel handle is the library's plus the name's hash, never 0.
TESSERA_CUDA_SIM_EXPORT CUresult cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!pKernel || !name || !*name) return CUDA_ERROR_INVALID_VALUE;
    const auto lib = reinterpret_cast<std::uintptr_t>(library);
    if (!d.is_library(lib)) return CUDA_ERROR_INVALID_HANDLE;
    std::uintptr_t hash = 1469598103934665603ULL;
    for (const char* c = name; *c; ++c) hash = (hash ^ static_cast<unsigned char>(*c)) * 1099511628211ULL;
    *pKernel = reinterpret_cast<CUkernel>(lib ^ (hash << 6) ^ 1);
    return CUDA_SUCCESS;
  });
}

// [CH] a stream of the current context; Flags DEFAULT or NON_BLOCKING.
TESSERA_CUDA_SIM_EXPORT CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!phStream || (Flags & ~CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    Context* c = d.current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *phStream = reinterpret_cast<CUstream>(d.create_stream(c));
    return CUDA_SUCCESS;
  });
}
TESSERA_CUDA_SIM_EXPORT CUresult cuStreamDestroy(CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return stream_destroy(hStream);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return stream_destroy(hStream);
}

// sim: the per-thread twins of the stream queries are not simulated; the
// legacy ones answer for every handle.
TESSERA_CUDA_SIM_EXPORT CUresult cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    Context* c = nullptr;
    if (CUresult r = stream_context(d, hStream, c); r != CUDA_SUCCESS) return r;
    *pctx = reinterpret_cast<CUcontext>(c);
    return CUDA_SUCCESS;
  });
}
TESSERA_CUDA_SIM_EXPORT CUresult cuStreamGetDevice(CUstream hStream, CUdevice* device) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    Context* c = nullptr;
    if (CUresult r = stream_context(d, hStream, c); r != CUDA_SUCCESS) return r;
    *device = c->device;
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuStreamBeginCapture(CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  TESSERA_CUDA_SIM_COUNT();
  return begin_capture(hStream, mode);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
    Stream* st = d.stream(hStream);
    if (!st || !st->capture) return CUDA_ERROR_ILLEGAL_STATE;
    *phGraph = reinterpret_cast<CUgraph>(st->capture);
    st->capture = nullptr;
    return CUDA_SUCCESS;
  });
}
TESSERA_CUDA_SIM_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!captureStatus) return CUDA_ERROR_INVALID_VALUE;
    Context* c = nullptr;
    if (CUresult r = stream_context(d, hStream, c); r != CUDA_SUCCESS) return r;
    *captureStatus = capture_of(d, hStream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  });
}

// [CH] flags must be 0.
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!phGraph || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    *phGraph = reinterpret_cast<CUgraph>(d.create_graph());
    return CUDA_SUCCESS;
  });
}
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) {
  TESSERA_CUDA_SIM_COUNT();
  return with_graph(hGraph, [](Driver& d, Graph& g) {
    d.destroy_graph(&g);
    return CUDA_SUCCESS;
  });
}

// [CH] a pinned allocation on a device location, with no shareable handle
// type; the address is chosen at once (sim: granule-aligned). sim: peer
// access descriptors are not modelled (NOT_SUPPORTED).
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                        const CUgraphNode* dependencies, std::size_t numDependencies,
                                                        CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams) {
  TESSERA_CUDA_SIM_COUNT();
  return with_graph(hGraph, [&](Driver& d, Graph& g) {
    if (!phGraphNode || !nodeParams || !valid_dependencies(d, dependencies, numDependencies))
      return CUDA_ERROR_INVALID_VALUE;
    const CUmemPoolProps& p = nodeParams->poolProps;
    if (p.allocType != CU_MEM_ALLOCATION_TYPE_PINNED || p.handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        p.location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(d, p.location.id) || nodeParams->bytesize == 0)
      return CUDA_ERROR_INVALID_VALUE;
    if (nodeParams->accessDescCount) return CUDA_ERROR_NOT_SUPPORTED;
    const CUdeviceptr addr = d.graph_addresses(nodeParams->bytesize);
    if (!addr) return CUDA_ERROR_OUT_OF_MEMORY;
    nodeParams->dptr = addr;
    *phGraphNode = reinterpret_cast<CUgraphNode>(
        d.add_node(&g, GraphNode{kGraphNodeMemAlloc, p.location.id, nodeParams->bytesize, addr}));
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                       const CUgraphNode* dependencies, std::size_t numDependencies,
                                                       CUdeviceptr dptr) {
  TESSERA_CUDA_SIM_COUNT();
  return with_graph(hGraph, [&](Driver& d, Graph& g) {
    if (!phGraphNode || !valid_dependencies(d, dependencies, numDependencies)) return CUDA_ERROR_INVALID_VALUE;
    if (!d.is_graph_allocation(dptr)) return CUDA_ERROR_INVALID_VALUE;  // sim: graph allocations only
    *phGraphNode = reinterpret_cast<CUgraphNode>(d.add_node(&g, GraphNode{kGraphNodeMemFree, 0, 0, dptr}));
    return CUDA_SUCCESS;
  });
}

// [CH] with nodes NULL, the count; else up to *numNodes of them (the rest
// NULL) and the count in *numNodes.
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes, std::size_t* numNodes) {
  TESSERA_CUDA_SIM_COUNT();
  return with_graph(hGraph, [&](Driver&, Graph& g) {
    if (!numNodes) return CUDA_ERROR_INVALID_VALUE;
    if (nodes) {
      for (std::size_t i = 0; i < *numNodes; ++i)
        nodes[i] = i < g.nodes.size() ? reinterpret_cast<CUgraphNode>(g.nodes[i]) : nullptr;
      *numNodes = std::min(*numNodes, g.nodes.size());
    } else {
      *numNodes = g.nodes.size();
    }
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType* type) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    GraphNode* n = d.node(hNode);
    if (!n || !type) return CUDA_ERROR_INVALID_VALUE;
    *type = static_cast<CUgraphNodeType>(n->type);
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS* params_out) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    GraphNode* n = d.node(hNode);
    if (!n || n->type != kGraphNodeMemAlloc || !params_out) return CUDA_ERROR_INVALID_VALUE;
    *params_out = CUDA_MEM_ALLOC_NODE_PARAMS{};
    params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params_out->poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, n->device};
    params_out->bytesize = n->bytes;
    params_out->dptr = n->dptr;
    return CUDA_SUCCESS;
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                                                    char* logBuffer, std::size_t bufferSize) {
  TESSERA_CUDA_SIM_COUNT();
  (void)phErrorNode;
  if (logBuffer && bufferSize) logBuffer[0] = '\0';
  return instantiate(phGraphExec, hGraph, 0, nullptr);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                       CUgraphNode* phErrorNode, char* logBuffer,
                                                       std::size_t bufferSize) {
  TESSERA_CUDA_SIM_COUNT();
  (void)phErrorNode;
  if (logBuffer && bufferSize) logBuffer[0] = '\0';
  return instantiate(phGraphExec, hGraph, 0, nullptr);
}
// [CH] UPLOAD is for cuGraphInstantiateWithParams only.
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                             unsigned long long flags) {
  TESSERA_CUDA_SIM_COUNT();
  if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) return CUDA_ERROR_INVALID_VALUE;
  return instantiate(phGraphExec, hGraph, flags, nullptr);
}

namespace {
CUresult instantiate_with_params(CUgraphExec* exec, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (!params) return CUDA_ERROR_INVALID_VALUE;
  const CUresult r = instantiate(exec, g, params->flags, params->hUploadStream);
  params->hErrNode_out = nullptr;
  params->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  return r;
}
}  // namespace

TESSERA_CUDA_SIM_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                              CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  TESSERA_CUDA_SIM_COUNT();
  return instantiate_with_params(phGraphExec, hGraph, instantiateParams);
}
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                                   CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  TESSERA_CUDA_SIM_COUNT();
  return instantiate_with_params(phGraphExec, hGraph, instantiateParams);
}

TESSERA_CUDA_SIM_EXPORT CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return on_exec(hGraphExec, hStream, [](Driver& d, GraphExec* e) { return d.graph_upload(e); });
}
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return on_exec(hGraphExec, hStream, [](Driver& d, GraphExec* e) { return d.graph_upload(e); });
}
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return on_exec(hGraphExec, hStream, [](Driver& d, GraphExec* e) { return d.graph_launch(e); });
}
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  TESSERA_CUDA_SIM_COUNT();
  return on_exec(hGraphExec, hStream, [](Driver& d, GraphExec* e) { return d.graph_launch(e); });
}
TESSERA_CUDA_SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    GraphExec* e = d.exec(hGraphExec);
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    return d.exec_destroy(e);
  });
}

// [CH] the current figures are read-only; sim: the highs are not settable here either.
TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!valid_device(d, device)) return CUDA_ERROR_INVALID_DEVICE;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    const GraphPool& p = d.graph_pool(device);
    auto* out = static_cast<cuuint64_t*>(value);
    switch (attr) {
      case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *out = p.used; return CUDA_SUCCESS;
      case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *out = p.used_high; return CUDA_SUCCESS;
      case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *out = p.reserved; return CUDA_SUCCESS;
      case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *out = p.reserved_high; return CUDA_SUCCESS;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  });
}

TESSERA_CUDA_SIM_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) {
  TESSERA_CUDA_SIM_COUNT();
  return initialized([&](Driver& d) {
    if (!valid_device(d, device)) return CUDA_ERROR_INVALID_DEVICE;
    return d.graph_trim(device);
  });
}
