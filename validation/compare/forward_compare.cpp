#include "validation/compare/forward_compare.hpp"

#include "model/config_error.hpp"

namespace kvtier::validation {
namespace {

void same(const std::string& what, const std::string& gpu, const std::string& sim,
          const ForwardResults& g, const ForwardResults& s) {
  if (!gpu.empty() && !sim.empty() && gpu != sim) {
    throw ConfigError("pair " + g.file + " / " + s.file + ": " + what + " differs (GPU '" + gpu +
                      "', simulator '" + sim + "'): compare runs of one configuration");
  }
}

// A trace is named by its file; the two sides may read it from different directories (the GPU
// machine's checkout and this one's), so the file name is what must agree.
std::string file_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

ErrorStats stats_of(const std::vector<ForwardError>& f, int which) {  // 0 all, 1 decode, 2 prefill
  std::vector<double> sim, gpu;
  for (const ForwardError& e : f) {
    if (which == 1 && !e.decode) continue;
    if (which == 2 && e.decode) continue;
    sim.push_back(e.sim_us);
    gpu.push_back(e.gpu_us);
  }
  return error_stats(sim, gpu);
}

}  // namespace

PairComparison compare_pair(const ForwardResults& gpu, const ForwardResults& sim) {
  same("placement", gpu.placement, sim.placement, gpu, sim);
  same("dtype", gpu.dtype, sim.dtype, gpu, sim);
  same("trace", file_name(gpu.trace), file_name(sim.trace), gpu, sim);
  if (gpu.placement == "mirror" && gpu.slots != 0 && sim.slots != 0 && gpu.slots != sim.slots) {
    throw ConfigError("pair " + gpu.file + " / " + sim.file + ": mirror pool differs (GPU " +
                      std::to_string(gpu.slots) + " pages, simulator " + std::to_string(sim.slots) +
                      " slots)");
  }
  if (gpu.forwards.size() != sim.forwards.size()) {
    throw ConfigError("pair " + gpu.file + " / " + sim.file + ": the GPU run has " +
                      std::to_string(gpu.forwards.size()) + " forwards and the simulator " +
                      std::to_string(sim.forwards.size()) +
                      ": replay both over the same forwards (kvtier run --forwards N cuts the "
                      "GPU run)");
  }
  if (gpu.forwards.empty())
    throw ConfigError("pair " + gpu.file + " / " + sim.file + ": no forwards");
  PairComparison p;
  p.placement = gpu.placement;
  p.label = (gpu.trace.empty() ? gpu.file : gpu.trace) + ", " + gpu.placement;
  if (gpu.placement == "mirror" && gpu.slots > 0)
    p.label += " " + std::to_string(gpu.slots) + " slots";
  if (!gpu.dtype.empty()) p.label += ", " + gpu.dtype;
  for (std::size_t i = 0; i < gpu.forwards.size(); ++i) {
    const ForwardResult& g = gpu.forwards[i];
    const ForwardResult& s = sim.forwards[i];
    if (g.forward != s.forward) {
      throw ConfigError("pair " + gpu.file + " / " + sim.file + ": entry " + std::to_string(i) +
                        " is forward " + std::to_string(g.forward) + " on the GPU and " +
                        std::to_string(s.forward) + " in the simulator");
    }
    const bool hits = g.hits != s.hits, misses = g.misses != s.misses,
               evictions = g.evictions != s.evictions;
    p.counters.hits_differ += hits;
    p.counters.misses_differ += misses;
    p.counters.evictions_differ += evictions;
    if ((hits || misses || evictions) && p.counters.first_forward < 0) {
      p.counters.first_forward = g.forward;
    }
    p.forwards.push_back({g.forward, g.us, s.us, g.decode});
  }
  p.all = stats_of(p.forwards, 0);
  p.decode = stats_of(p.forwards, 1);
  p.prefill = stats_of(p.forwards, 2);
  return p;
}

// The pairs of `placement` ("all": every pair) as one summary of their forwards.
PlacementSummary summary_of(const std::vector<PairComparison>& pairs,
                            const std::string& placement) {
  PlacementSummary s;
  s.placement = placement;
  std::vector<ForwardError> all;
  for (const PairComparison& q : pairs) {
    if (placement != "all" && q.placement != placement) continue;
    ++s.pairs;
    s.counters_exact = s.counters_exact && q.counters.exact();
    all.insert(all.end(), q.forwards.begin(), q.forwards.end());
  }
  s.all = stats_of(all, 0);
  s.decode = stats_of(all, 1);
  s.prefill = stats_of(all, 2);
  return s;
}

Comparison compare(const std::vector<std::pair<ForwardResults, ForwardResults>>& gpu_sim) {
  Comparison c;
  for (const auto& [gpu, sim] : gpu_sim)
    c.pairs.push_back(compare_pair(gpu, sim));
  for (const PairComparison& p : c.pairs) {
    bool seen = false;
    for (const PlacementSummary& s : c.placements)
      seen = seen || s.placement == p.placement;
    if (!seen) c.placements.push_back(summary_of(c.pairs, p.placement));
  }
  c.pooled = summary_of(c.pairs, "all");
  return c;
}

}  // namespace kvtier::validation
