#include "planner/plan_check.hpp"

#include <map>
#include <set>

namespace tessera::planner {

Result<void> check_plan(const Problem& p, const Plan& plan) {
  std::vector<uint32_t> per_type(p.gpu_types.size(), 0);
  std::map<std::pair<int, uint32_t>, uint32_t> seen;  // (service, replica) -> ranks placed
  std::vector<double> served(p.services.size(), 0.0);
  for (size_t g = 0; g < plan.gpus.size(); ++g) {
    const auto& gpu = plan.gpus[g];
    const GpuModel& model = *p.gpu_types[size_t(gpu.gpu_type)].model;
    ++per_type[size_t(gpu.gpu_type)];
    std::string where = "GPU " + std::to_string(g) + " (" + model.name + ")";
    bool whole = gpu.instances.size() == 1 && unit_of(p, gpu.instances[0]).profile == kWholeGpu;
    if (!whole) {
      MigLayout layout;
      for (const auto& inst : gpu.instances) layout.push_back({inst.profile, inst.start});
      if (auto ok = check_layout(model, layout); !ok) return fail(Errc::internal, where + ": " + ok.error().message);
    }
    for (const auto& inst : gpu.instances) {
      const Unit& unit = unit_of(p, inst);
      if (unit.gpu_type != gpu.gpu_type) return fail(Errc::internal, where + ": instance of another GPU model");
      if (inst.sharing == Isolation::dedicated && inst.replicas.size() > 1)
        return fail(Errc::internal, where + ": dedicated " + unit.name + " holds " + std::to_string(inst.replicas.size()) + " replicas");
      uint64_t mem = 0;
      double compute = 0;
      for (const auto& r : inst.replicas) {
        const Service& s = p.services[size_t(r.service)];
        if (s.isolation != inst.sharing)
          return fail(Errc::internal, where + ": " + s.name + " (" + std::string(config::to_string(s.isolation)) +
                                          ") in a " + std::string(config::to_string(inst.sharing)) + " instance");
        if (s.gpus > 1 && unit.profile != kWholeGpu)
          return fail(Errc::internal, where + ": tensor-parallel " + s.name + " on a MIG instance");
        mem += s.memory_mib;
        compute += s.compute;
        ++seen[{r.service, r.replica}];
        if (r.rank == 0 && s.demand) served[size_t(r.service)] += s.capacity[size_t(inst.unit)];
      }
      if (mem > unit.memory_mib)
        return fail(Errc::internal, where + ": " + unit.name + " holds " + std::to_string(mem) + " MiB, more than its " +
                                        std::to_string(unit.memory_mib) + " MiB");
      if (compute > 1.0 + 1e-9) return fail(Errc::internal, where + ": compute shares above 1 on " + unit.name);
    }
  }
  for (size_t t = 0; t < p.gpu_types.size(); ++t)
    if (p.gpu_types[t].count && per_type[t] > *p.gpu_types[t].count)
      return fail(Errc::internal, "plan uses " + std::to_string(per_type[t]) + " " + p.gpu_types[t].model->name +
                                      ", more than the fleet's " + std::to_string(*p.gpu_types[t].count));
  for (size_t s = 0; s < p.services.size(); ++s) {
    const Service& svc = p.services[s];
    uint32_t replicas = svc.replicas.value_or(static_cast<uint32_t>(plan.sites[s].size()));
    if (!svc.demand && plan.sites[s].size() != replicas)
      return fail(Errc::internal, svc.name + ": " + std::to_string(plan.sites[s].size()) + " replicas placed, " +
                                      std::to_string(replicas) + " wanted");
    for (uint32_t r = 0; r < replicas; ++r) {
      auto it = seen.find({int(s), r});
      uint32_t n = it == seen.end() ? 0 : it->second;
      if (n != svc.gpus)
        return fail(Errc::internal, svc.name + " replica " + std::to_string(r) + " placed on " + std::to_string(n) +
                                        " GPUs or instances, expected " + std::to_string(svc.gpus));
      std::set<uint32_t> gpus;
      for (const auto& [gpu, inst] : plan.sites[s][r]) gpus.insert(gpu);
      if (gpus.size() != svc.gpus) return fail(Errc::internal, svc.name + " replica " + std::to_string(r) + " shares a GPU between ranks");
    }
    if (svc.demand && served[s] + 1e-9 < *svc.demand)
      return fail(Errc::internal, svc.name + ": serves " + std::to_string(served[s]) + " of its demand " + std::to_string(*svc.demand));
  }
  return {};
}

}  // namespace tessera::planner
