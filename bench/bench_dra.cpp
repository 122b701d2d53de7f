// Whether the DRA driver's device order strands MIG slices (docs/benchmarks.md,
// "DRA: stranding"). The stock kube-scheduler's structured allocator walks a
// node's devices in the order they are listed and takes the first one that
// matches the claim (type mig, attribute `profile`) and whose counters still
// fit. tessera re-publishes its slices after every change, so its order is
// recomputed from what is taken after each allocation and release; NVIDIA's
// order (by_start) is static. Each row replays the same traces under both.
//
// A trace: MIG claims with Poisson arrivals, exponential lifetimes (counted
// from allocation) and profiles drawn from a mix favouring small ones, at
// offered loads of 0.5, 0.8 and 1.0 of the node's memory slices; a fixed seed
// per trace, our own generator (std::mt19937_64), so the output is the same on
// every run. A claim that finds no device waits; every waiting claim is
// retried, in arrival order, whenever something departs.
//
// Stranded: a try (an arrival or a retry) that finds no device while some GPU
// of the node could hold the claim by its MIG rules (core's check_layout) if
// that GPU's instances had been placed differently: place_profiles(model,
// its profiles + the claim's) succeeds. The slices are there; earlier
// placement choices put them out of reach. "fixed-fit" counts the tries that
// failed although the claim fits around the instances where they are: the
// counters are exact (tests/sharing/dra_test.cpp), so it must be 0 under
// any order, and the benchmark fails if it is not. "choice" is the share of
// allocations where more than one placement fit: the only ones an order can
// decide.
//
// Usage: bench_dra [--quick] [--traces N] [--claims N] [--model NAME] [--gpus N] [--load X] [--detail]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "core/catalog.hpp"
#include "core/mig_layout.hpp"
#include "sharing/dra.hpp"

using namespace tessera;
namespace dra = tessera::sharing::dra;

namespace {

// ---------------------------------------------------------------- traces

struct MixEntry {
  const char* profile;
  double weight;
};

// The A100-80GB and H100-80GB share their MIG geometry (catalog_data.cpp); the
// mix is the same on both: small instances most often, a whole-GPU 7g rarely.
const std::vector<MixEntry> kMix80 = {{"1g.10gb", 0.35}, {"1g.20gb", 0.20}, {"2g.20gb", 0.20},
                                      {"3g.40gb", 0.12}, {"4g.40gb", 0.08}, {"7g.80gb", 0.05}};

struct Claim {
  double arrival = 0;
  double lifetime = 0;
  uint32_t profile = 0;  // index into the model's profiles
};

// Uniform in [0, 1) from the top 53 bits: the same numbers on every standard
// library (std::*_distribution's algorithms are left to the implementation).
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
double exponential(std::mt19937_64& rng, double mean) { return -mean * std::log1p(-uniform(rng)); }

// `claims` arrivals at a rate that offers `load` of the node's memory slices
// (mean lifetime 1).
std::vector<Claim> make_trace(const GpuModel& model, const std::vector<MixEntry>& mix, uint32_t gpus, double load,
                              size_t claims, uint64_t seed) {
  std::vector<uint32_t> profiles;
  std::vector<double> cumulative;
  double total = 0, mean_slices = 0;
  for (const auto& e : mix) total += e.weight;
  for (const auto& e : mix) {
    const auto* p = model.profile(e.profile);
    if (!p) {
      std::fprintf(stderr, "bench_dra: %s has no profile %s\n", model.name.c_str(), e.profile);
      std::exit(1);
    }
    profiles.push_back(static_cast<uint32_t>(p - model.profiles.data()));
    cumulative.push_back((cumulative.empty() ? 0 : cumulative.back()) + e.weight / total);
    mean_slices += e.weight / total * p->memory_slices;
  }
  const double rate = load * gpus * model.memory_slices / mean_slices;
  std::mt19937_64 rng(seed);
  std::vector<Claim> out;
  double t = 0;
  for (size_t i = 0; i < claims; ++i) {
    t += exponential(rng, 1.0 / rate);
    const double u = uniform(rng);
    size_t k = 0;
    while (k + 1 < cumulative.size() && u >= cumulative[k]) ++k;
    out.push_back({t, exponential(rng, 1.0), profiles[k]});
  }
  return out;
}

// ---------------------------------------------------------------- the scheduler

dra::Gpu make_gpu(const GpuModel& m, uint32_t minor) {
  dra::Gpu g;
  g.index = minor;
  g.minor = minor;
  g.uuid = "GPU-" + std::to_string(minor);
  g.model = &m;
  g.product_name = m.nvml_name;
  g.driver_version = "550.90.07";
  g.cuda_driver_version = "12.4";
  g.memory_bytes = m.memory_mib << 20;
  g.mig_enabled = true;
  return g;
}

// The structured allocator's first fit over the published devices. The list
// depends only on what is taken, so it is kept per state the node has been
// in (as indices into the devices of an empty node: a device's counters and
// attributes do not change with what is taken; only its place in the list).
class Scheduler {
 public:
  Scheduler(const GpuModel& model, uint32_t gpus, dra::Order order) : model_(model), order_(order), taken_(gpus) {
    for (uint32_t i = 0; i < gpus; ++i) gpus_.push_back(make_gpu(model, i));
    for (auto& d : dra::devices(gpus_, taken_, {.order = dra::Order::by_start})) {
      if (!d.mig) continue;
      index_[{d.gpu, *d.mig}] = static_cast<uint32_t>(all_.size());
      all_.push_back(std::move(d));
    }
  }

  const std::vector<dra::Taken>& taken() const { return taken_; }
  // An empty node again; the lists met so far stay known.
  void reset() {
    for (auto& t : taken_) t.clear();
    ++version_;
  }

  std::optional<std::pair<uint32_t, PlacedInstance>> allocate(uint32_t profile) {
    const std::string& name = model_.profiles[profile].name;
    for (uint32_t i : listed()) {
      const dra::Device& d = all_[i];
      if (std::get<std::string>(d.attributes.at("type")) != "mig") continue;
      if (std::get<std::string>(d.attributes.at("profile")) != name) continue;
      if (!dra::fits(gpus_[d.gpu], d, taken_[d.gpu])) continue;
      taken_[d.gpu].push_back(*d.mig);
      std::sort(taken_[d.gpu].begin(), taken_[d.gpu].end());
      ++version_;
      return std::make_pair(d.gpu, *d.mig);
    }
    return std::nullopt;
  }

  void release(uint32_t gpu, const PlacedInstance& instance) {
    auto& t = taken_[gpu];
    t.erase(std::find(t.begin(), t.end(), instance));
    ++version_;
  }

  // Bumped on every change: a try that failed fails again until it moves.
  uint64_t version() const { return version_; }

 private:
  const std::vector<uint32_t>& listed() {
    const std::vector<dra::Taken> none;
    const auto& key = order_ == dra::Order::by_start ? none : taken_;  // by_start: one list
    auto it = lists_.find(key);
    if (it != lists_.end()) return it->second;
    std::vector<uint32_t> order;
    for (const auto& d : dra::devices(gpus_, taken_, {.order = order_}))
      if (d.mig) order.push_back(index_.at({d.gpu, *d.mig}));
    return lists_.emplace(key, std::move(order)).first->second;
  }

  const GpuModel& model_;
  dra::Order order_;
  std::vector<dra::Gpu> gpus_;
  std::vector<dra::Taken> taken_;  // each sorted: the same state, the same key
  std::vector<dra::Device> all_;
  std::map<std::pair<uint32_t, PlacedInstance>, uint32_t> index_;
  std::map<std::vector<dra::Taken>, std::vector<uint32_t>> lists_;
  uint64_t version_ = 0;
};

// ---------------------------------------------------------------- the oracles

// Some GPU takes `profile` around its instances where they are.
bool fits_fixed(const GpuModel& m, const std::vector<dra::Taken>& taken, uint32_t profile) {
  for (const auto& t : taken)
    for (const auto& pl : m.profiles[profile].placements) {
      std::vector<PlacedInstance> next = t;
      next.push_back({profile, pl.start});
      if (check_layout(m, next)) return true;
    }
  return false;
}

// How many placements of `profile` fit the node around its instances.
size_t placements_that_fit(const GpuModel& m, const std::vector<dra::Taken>& taken, uint32_t profile) {
  size_t n = 0;
  for (const auto& t : taken)
    for (const auto& pl : m.profiles[profile].placements) {
      std::vector<PlacedInstance> next = t;
      next.push_back({profile, pl.start});
      n += check_layout(m, next).has_value();
    }
  return n;
}

// Some GPU holds its instances' profiles and `profile` in some legal layout.
bool fits_repacked(const GpuModel& m, const std::vector<dra::Taken>& taken, uint32_t profile) {
  for (const auto& t : taken) {
    std::vector<uint32_t> wanted{profile};
    for (const auto& i : t) wanted.push_back(i.profile);
    if (place_profiles(m, wanted)) return true;
  }
  return false;
}

// ---------------------------------------------------------------- one trace

struct TraceResult {
  size_t claims = 0;
  size_t pending = 0;           // claims that waited at all
  size_t strand_events = 0;     // failed tries while a repacked GPU could hold the claim
  size_t stranded_claims = 0;   // claims with at least one such try
  size_t fixed_fit = 0;         // failed tries while it fits where the instances are (must be 0)
  double wait = 0;              // summed time from arrival to allocation
  size_t choices = 0;           // allocations where more than one placement fit: where the order decides
  std::map<uint32_t, size_t> stranded_by_profile;  // stranded claims per profile
};

TraceResult replay(const GpuModel& model, Scheduler& s, const std::vector<Claim>& trace) {
  s.reset();
  TraceResult r;
  r.claims = trace.size();
  struct Running {
    double until;
    size_t claim;
    uint32_t gpu;
    PlacedInstance instance;
    bool operator>(const Running& o) const { return until != o.until ? until > o.until : claim > o.claim; }
  };
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  std::deque<size_t> waiting;
  std::vector<bool> stranded(trace.size(), false);

  // A failed try of `claim`; the oracles' answers hold until the next change.
  std::map<uint32_t, std::pair<uint64_t, std::pair<bool, bool>>> verdicts;  // profile -> (version, (fixed, repacked))
  auto failed = [&](size_t claim) {
    const uint32_t p = trace[claim].profile;
    auto it = verdicts.find(p);
    if (it == verdicts.end() || it->second.first != s.version())
      it = verdicts.insert_or_assign(p, std::make_pair(s.version(), std::make_pair(fits_fixed(model, s.taken(), p),
                                                                                  fits_repacked(model, s.taken(), p))))
               .first;
    if (it->second.second.first) ++r.fixed_fit;
    if (it->second.second.second) {
      ++r.strand_events;
      if (!stranded[claim]) {
        stranded[claim] = true;
        ++r.stranded_claims;
        ++r.stranded_by_profile[p];
      }
    }
  };
  // A try; a profile that failed since the last change fails again without a walk.
  std::map<uint32_t, uint64_t> failed_at;
  auto attempt = [&](size_t claim, double now) {
    const uint32_t p = trace[claim].profile;
    auto f = failed_at.find(p);
    std::optional<std::pair<uint32_t, PlacedInstance>> got;
    if (f == failed_at.end() || f->second != s.version()) got = s.allocate(p);
    if (!got) {
      failed_at[p] = s.version();
      failed(claim);
      return false;
    }
    std::vector<dra::Taken> before = s.taken();
    auto& t = before[got->first];
    t.erase(std::find(t.begin(), t.end(), got->second));
    r.choices += placements_that_fit(model, before, p) > 1;
    r.wait += now - trace[claim].arrival;
    running.push({now + trace[claim].lifetime, claim, got->first, got->second});
    return true;
  };

  size_t next = 0;
  while (next < trace.size() || !running.empty()) {
    const bool departure = !running.empty() && (next == trace.size() || running.top().until <= trace[next].arrival);
    if (departure) {
      const Running done = running.top();
      running.pop();
      s.release(done.gpu, done.instance);
      std::deque<size_t> still;
      for (size_t c : waiting)
        if (!attempt(c, done.until)) still.push_back(c);
      waiting.swap(still);
    } else {
      const size_t c = next++;
      if (!attempt(c, trace[c].arrival)) {
        ++r.pending;
        waiting.push_back(c);
      }
    }
  }
  if (!waiting.empty()) {
    std::fprintf(stderr, "bench_dra: %zu claims never placed on an empty node\n", waiting.size());
    std::exit(1);
  }
  return r;
}

// ---------------------------------------------------------------- the table

struct Row {
  size_t traces = 0, claims = 0, pending = 0, strand_events = 0, stranded_claims = 0, fixed_fit = 0;
  size_t clean_traces = 0;  // traces without a strand event
  size_t worst = 0;         // most strand events in one trace
  double wait = 0;
  size_t choices = 0;
  std::vector<size_t> per_trace;
  std::map<uint32_t, size_t> stranded_by_profile;
};

const char* order_name(dra::Order o) { return o == dra::Order::tessera ? "tessera" : "by_start"; }

std::string ratio(size_t a, size_t b) {
  if (b == 0) return a == 0 ? "-" : "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(a) / static_cast<double>(b));
  return buf;
}

void usage() {
  std::printf(
      "Usage: bench_dra [--quick] [--traces N] [--claims N] [--model NAME] [--gpus N] [--load X] [--detail]\n"
      "Replays MIG claim traces through the kube-scheduler's first fit over the DRA driver's devices, in\n"
      "tessera's order and in NVIDIA's (by_start), on nodes of 1, 2 and 8 A100-80GB and H100-80GB at offered\n"
      "loads 0.5, 0.8 and 1.0, and counts the claims left waiting while a GPU could have held them had its\n"
      "instances been placed differently (stranded).\n"
      "  --quick     2 traces of 150 claims per row (a smoke test)\n"
      "  --traces N  traces per row (default 20)\n"
      "  --claims N  claims per trace (default 1000: about 2000 arrivals and departures)\n"
      "  --model M   only the catalog's model M (its MIG profiles must include the mix's)\n"
      "  --gpus N    only nodes of N GPUs\n"
      "  --load X    only offered load X: arrival rate x mean lifetime x mean memory slices per claim,\n"
      "              over the node's memory slices\n"
      "  --detail    also each row's stranded claims by profile\n");
}

}  // namespace

int main(int argc, char** argv) {
  size_t traces = 20, claims = 1000;
  bool detail = false;
  std::vector<std::string> models{"A100-SXM4-80GB", "H100-SXM5-80GB"};
  std::vector<uint32_t> node_sizes{1, 2, 8};
  std::vector<double> loads{0.5, 0.8, 1.0};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--detail") {
      detail = true;
    } else if (a == "--quick") {
      traces = 2;
      claims = 150;
    } else if (a == "--model" && i + 1 < argc) {
      models = {argv[++i]};
    } else if (a == "--gpus" && i + 1 < argc) {
      const long n = std::atol(argv[++i]);
      if (n <= 0 || n > 64) {
        std::fprintf(stderr, "bench_dra: --gpus wants 1 to 64\n");
        return 2;
      }
      node_sizes = {static_cast<uint32_t>(n)};
    } else if (a == "--load" && i + 1 < argc) {
      const double x = std::atof(argv[++i]);
      if (!(x > 0 && x <= 4)) {
        std::fprintf(stderr, "bench_dra: --load wants a number in (0, 4]\n");
        return 2;
      }
      loads = {x};
    } else if ((a == "--traces" || a == "--claims") && i + 1 < argc) {
      const long n = std::atol(argv[++i]);
      if (n <= 0) {
        std::fprintf(stderr, "bench_dra: %s wants a positive number\n", a.c_str());
        return 2;
      }
      (a == "--traces" ? traces : claims) = static_cast<size_t>(n);
    } else {
      usage();
      return 2;
    }
  }

  std::printf("DRA first fit, tessera's order against NVIDIA's (by_start): %zu traces x %zu claims per row,\n"
              "the same traces under both orders. Mix: ",
              traces, claims);
  for (size_t i = 0; i < kMix80.size(); ++i) std::printf("%s%s %.2f", i ? ", " : "", kMix80[i].profile, kMix80[i].weight);
  std::printf(".\nPoisson arrivals, exponential lifetimes (mean 1); load = arrival rate x mean memory slices per claim\n"
              "over the node's memory slices. strand = tries (arrival or retry) that found no device while a GPU could\n"
              "hold the claim had its instances been placed differently; stranded = claims with such a try; worst =\n"
              "most strands in one trace; clean = traces without one; pending = claims that waited at all; wait = mean\n"
              "time from arrival to allocation, in mean lifetimes; choice = allocations where more than one placement\n"
              "fit the node, the only ones the order decides; fixed-fit = failed tries although the claim fit around\n"
              "the instances where they are (the counters are exact: always 0).\n\n");
  std::printf("%-8s %-15s %4s %4s %6s %7s %7s %7s %8s %7s %6s %6s %6s %9s\n", "order", "model", "GPUs", "load",
              "traces", "claims", "pending", "strand", "stranded", "worst", "clean", "wait", "choice", "fixed-fit");

  bool exact = true;
  std::vector<std::string> summary;
  size_t rows_total = 0, rows_met = 0;
  for (const auto& name : models) {
    const GpuModel* model = Catalog::builtin().find(name);
    if (!model) {
      std::fprintf(stderr, "bench_dra: the catalog has no %s\n", name.c_str());
      return 1;
    }
    const char* model_name = model->name.c_str();
    for (uint32_t gpus : node_sizes) {
      for (double load : loads) {
        std::map<dra::Order, Row> rows;
        std::map<dra::Order, Scheduler> nodes;
        for (dra::Order order : {dra::Order::tessera, dra::Order::by_start}) nodes.try_emplace(order, *model, gpus, order);
        for (size_t t = 0; t < traces; ++t) {
          const uint64_t seed = 1000003ull * (t + 1) + 101ull * gpus + static_cast<uint64_t>(std::lround(load * 100));
          const auto trace = make_trace(*model, kMix80, gpus, load, claims, seed);
          for (dra::Order order : {dra::Order::tessera, dra::Order::by_start}) {
            const auto r = replay(*model, nodes.at(order), trace);
            Row& row = rows[order];
            ++row.traces;
            row.claims += r.claims;
            row.pending += r.pending;
            row.strand_events += r.strand_events;
            row.stranded_claims += r.stranded_claims;
            row.fixed_fit += r.fixed_fit;
            row.clean_traces += r.strand_events == 0;
            row.worst = std::max(row.worst, r.strand_events);
            row.wait += r.wait;
            row.choices += r.choices;
            row.per_trace.push_back(r.strand_events);
            for (const auto& [p, n] : r.stranded_by_profile) row.stranded_by_profile[p] += n;
          }
        }
        for (dra::Order order : {dra::Order::tessera, dra::Order::by_start}) {
          const Row& row = rows[order];
          exact = exact && row.fixed_fit == 0;
          std::printf("%-8s %-15s %4u %4.1f %6zu %7zu %7zu %7zu %8zu %7zu %6zu %6.3f %5.0f%% %9zu\n", order_name(order),
                      model_name, gpus, load, row.traces, row.claims, row.pending, row.strand_events, row.stranded_claims,
                      row.worst, row.clean_traces, row.wait / static_cast<double>(row.claims),
                      100.0 * static_cast<double>(row.choices) / static_cast<double>(row.claims), row.fixed_fit);
          if (detail) {
            std::printf("         stranded by profile:");
            for (const auto& [p, n] : row.stranded_by_profile) std::printf(" %s %zu", model->profiles[p].name.c_str(), n);
            std::printf("\n");
          }
        }
        const Row& a = rows[dra::Order::tessera];
        const Row& b = rows[dra::Order::by_start];
        size_t over_half = 0;  // traces where tessera strands more than half of by_start's
        for (size_t t = 0; t < a.per_trace.size(); ++t) over_half += 2 * a.per_trace[t] > b.per_trace[t];
        // The target: no strand on most traces, and never more than half of by_start's.
        const bool met = 2 * a.clean_traces > a.traces && over_half == 0;
        ++rows_total;
        rows_met += met;
        char line[256];
        std::snprintf(line, sizeof line, "%-15s %4u %4.1f %8s %9s %8s %12zu/%-3zu %s", model_name, gpus, load,
                      ratio(a.strand_events, b.strand_events).c_str(), ratio(a.stranded_claims, b.stranded_claims).c_str(),
                      ratio(a.pending, b.pending).c_str(), over_half, a.traces, met ? "yes" : "no");
        summary.push_back(line);
        std::fflush(stdout);
      }
    }
  }
  std::printf("\ntessera / by_start (over half = traces where tessera strands more than half of by_start's;\n"
              "target = tessera clean on most traces and over half on none):\n"
              "%-15s %4s %4s %8s %9s %8s %16s %s\n",
              "model", "GPUs", "load", "strand", "stranded", "pending", "over half", "target");
  for (const auto& l : summary) std::printf("%s\n", l.c_str());
  std::printf("target met on %zu of %zu rows\n", rows_met, rows_total);
  if (!exact) {
    std::fprintf(stderr, "bench_dra: a claim found no device although it fit where the instances are\n");
    return 1;
  }
  return 0;
}
