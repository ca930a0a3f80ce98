#include "sim/planner.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <limits>
#include <thread>

#include "model/config_error.hpp"
#include "model/profile_trust.hpp"
#include "sim/plan_jobs.hpp"

namespace kvtier::sim {

PointSummary summarize(const SimResult& r, std::int64_t device_capacity_bytes) {
  PointSummary s;
  s.device_bytes = r.device_bytes;
  s.fits_device = device_capacity_bytes <= 0 || r.device_bytes <= device_capacity_bytes;
  s.decode_tps = r.decode_tokens_per_s();
  s.prefill_tps = r.prefill_tokens_per_s();
  s.hit_rate = r.hit_rate();
  s.has_lookups = r.total().lookups > 0;
  s.forward_us = (r.decode_time_ns + r.prefill_time_ns) / 1e3;
  const LayerStats t = r.total();
  s.misses = t.misses;
  s.drops = t.drops;
  s.h2d_bytes = r.h2d_bytes;
  s.d2h_bytes = r.d2h_bytes;
  s.h2d_util = r.makespan_ns > 0 ? static_cast<double>(r.busy_ns[static_cast<int>(Resource::h2d)]) /
                                       static_cast<double>(r.makespan_ns)
                                 : 0.0;
  for (const auto& l : r.layers) {
    s.layer_hit_rate.push_back(
        l.lookups > 0 ? static_cast<double>(l.hits) / static_cast<double>(l.lookups) : 1.0);
  }
  return s;
}

namespace {

std::string gib(std::int64_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::vector<std::int64_t> auto_sizes(std::int64_t lo, std::int64_t hi, int points) {
  std::vector<std::int64_t> s;
  if (hi <= lo || points <= 1) return {std::max(lo, hi)};
  for (int i = 0; i < points; ++i) {
    const double f = static_cast<double>(i) / (points - 1);
    s.push_back(static_cast<std::int64_t>(std::llround(std::exp(
        std::log(static_cast<double>(lo)) * (1 - f) + std::log(static_cast<double>(hi)) * f))));
  }
  s.front() = lo;
  s.back() = hi;
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

}  // namespace

namespace {

// One simulation of the sweep: device, host, or a mirror (unit, size) point, or a Belady count.
struct SweepJob {
  Placement placement;
  int unit = 0;
  std::size_t size = 0;
  bool belady = false;
};

// The sizes a unit's sweep covers: the user's (each at least the planner's minimum), or
// `points` sizes up to everything resident with no row truncated by the select width.
std::vector<std::int64_t> sweep_sizes(const PlanConfig& cfg, const PlanResult& res) {
  const frontend::TraceBounds& st = res.stats;
  // Everything resident with no row truncated: the largest pool the trace can use.
  const std::int64_t usable =
      std::max({res.min_slots, std::int64_t{st.peak_pages}, st.max_step_pages});
  if (cfg.sizes.empty()) {
    return auto_sizes(res.min_slots, usable, cfg.points);
  }
  for (std::int64_t s : cfg.sizes) {
    if (s > usable) {
      throw ConfigError("--sizes: a pool of " + std::to_string(s) +
                        " slots is beyond what this trace can use: every page it holds at once "
                        "fits in " +
                        std::to_string(usable) + " slots, and a larger pool changes nothing");
    }
    if (s < res.min_slots) {
      throw ConfigError(
          "pool of " + std::to_string(s) +
          " slots cannot hold the trace's largest step (its rows' distinct pages plus the "
          "pages it writes): the planner's minimum is " +
          std::to_string(res.min_slots) +
          " slots (`kvtier sim` runs smaller pools, truncating rows to the select width)");
    }
  }
  return cfg.sizes;
}

// A unit's sweep from its one-pass curve, and the jobs that simulate it.
UnitSweep plan_unit(const PlanConfig& cfg, const PlanResult& res, const MrcResult& mrc, int u,
                    std::vector<SweepJob>& jobs) {
  UnitSweep us;
  us.unit = cfg.units[static_cast<std::size_t>(u)];
  us.lookups = mrc.curve.lookups;
  us.sizes = sweep_sizes(cfg, res);
  for (std::int64_t s : us.sizes)
    us.lru_misses.push_back(mrc.curve.misses(s));
  us.points.resize(us.sizes.size());
  const bool belady = cfg.belady && !mrc.log.dropped;
  if (cfg.belady && mrc.log.dropped) {
    us.belady_note = "skipped: the trace's query log is over " +
                     std::to_string(cfg.belady_max_entries) + " entries";
  }
  // Every first reference misses under any policy, and Belady <= LRU: where LRU has only
  // those compulsory misses, so has Belady (no run needed).
  const std::int64_t compulsory = mrc.curve.misses(std::numeric_limits<std::int64_t>::max());
  if (belady) us.belady_misses.resize(us.sizes.size());
  for (std::size_t i = 0; i < us.sizes.size(); ++i) {
    jobs.push_back({Placement::mirror, u, i, false});
    if (!belady) continue;
    if (us.lru_misses[i] == compulsory) {
      us.belady_misses[i] = compulsory;
    } else {
      jobs.push_back({Placement::mirror, u, i, true});
    }
  }
  return us;
}

// Cliff and thresholds against all-resident speed: the same placement and unit at the
// largest pool swept (by default everything resident), so that the thresholds size the pool
// rather than compare placements (the mirror's per-step ensure and store cost stays even
// with every page resident; the recommendation compares placements). A size that drops
// pages past the select width changes what the model attends, so it never qualifies.
void find_thresholds(UnitSweep& us, double within, double chosen) {
  const double ref = us.points.back().decode_tps;
  double steepest = -1;
  for (std::size_t i = 1; i < us.sizes.size(); ++i) {
    const double drop = (us.points[i].decode_tps - us.points[i - 1].decode_tps) /
                        static_cast<double>(us.sizes[i] - us.sizes[i - 1]);
    if (drop > steepest) {
      steepest = drop;
      us.cliff_slots = us.sizes[i];
    }
  }
  for (std::size_t i = 0; i < us.sizes.size(); ++i) {
    if (us.points[i].drops != 0 || !us.points[i].fits_device) continue;
    if (us.within_slots == 0 && us.points[i].decode_tps >= ref * (1 - within)) {
      us.within_slots = us.sizes[i];
    }
    if (us.chosen_slots == 0 && us.points[i].decode_tps >= ref * (1 - chosen)) {
      us.chosen_slots = us.sizes[i];
    }
  }
}

const PointSummary& point_at(const UnitSweep& us, std::int64_t slots) {
  const auto it = std::find(us.sizes.begin(), us.sizes.end(), slots);
  return us.points[static_cast<std::size_t>(it - us.sizes.begin())];
}

// The unit that qualifies with the smallest pool; at equal pools the faster one.
const UnitSweep* best_mirror_unit(const std::vector<UnitSweep>& units) {
  auto tps_at = [](const UnitSweep& us, std::int64_t slots) {
    return point_at(us, slots).decode_tps;
  };
  const UnitSweep* best_unit = nullptr;
  for (const UnitSweep& us : units) {
    if (best_unit == nullptr) {
      best_unit = &us;
    } else if (us.within_slots != 0) {
      const bool better =
          best_unit->within_slots == 0 || us.within_slots < best_unit->within_slots ||
          (us.within_slots == best_unit->within_slots &&
           tps_at(us, us.within_slots) > tps_at(*best_unit, best_unit->within_slots));
      if (better) best_unit = &us;
    }
  }
  return best_unit;
}

// Recommendation: the fastest decode placement, and for mirror the unit and pool size.
std::string recommend(const PlanResult& res, const PlanConfig& cfg) {
  const std::int64_t device_capacity = res.device_capacity_bytes;
  std::string rec;
  double best = 0;
  if (res.has_device) {
    best = res.device.decode_tps;
    rec = res.device.fits_device
              ? "device (every page in GPU memory) is the speed reference"
              : "device does not fit this card: it needs " + gib(res.device.device_bytes) +
                    ", the card has " + gib(device_capacity);
  }
  const UnitSweep* best_unit = best_mirror_unit(res.units);
  if (best_unit != nullptr) {
    if (best_unit->within_slots != 0) {
      const double at_tps = point_at(*best_unit, best_unit->within_slots).decode_tps;
      rec = "mirror, residency unit " + std::string(to_string(best_unit->unit)) + ", pool of " +
            std::to_string(best_unit->within_slots) + " slots: within " +
            std::to_string(static_cast<int>(std::lround(cfg.within * 100))) +
            " % of its all-resident decode speed with no truncated selection (cliff below " +
            std::to_string(best_unit->cliff_slots) + " slots)";
      if (res.has_device && res.device.decode_tps > 0) {
        rec +=
            "; " +
            std::to_string(static_cast<int>(std::lround(100.0 * at_tps / res.device.decode_tps))) +
            " % of the device placement's decode speed" +
            (res.device.fits_device ? "" : ", which does not fit this card");
      }
    } else {
      rec = "no mirror pool size swept is within " +
            std::to_string(static_cast<int>(std::lround(cfg.within * 100))) +
            " % of all-resident decode speed while it fits the card and truncates no selection";
    }
  }
  // Every page in GPU memory beats a mirror pool that needs as much device memory or more
  // (wide prefill rows can make the no-truncation pool larger than the whole page space).
  if (res.has_device && res.device.fits_device && best_unit != nullptr &&
      best_unit->within_slots != 0) {
    const PointSummary& pick = point_at(*best_unit, best_unit->within_slots);
    if (res.device.device_bytes <= pick.device_bytes) {
      rec = "device: every page fits the card in " + gib(res.device.device_bytes) + " of " +
            gib(device_capacity) + ", no more than the mirror pool that qualifies needs (" +
            std::string(to_string(best_unit->unit)) + " unit, " +
            std::to_string(best_unit->within_slots) + " slots, " + gib(pick.device_bytes) +
            "); mirror pays off once the page space outgrows the card";
    }
  }
  if (res.has_host && res.host.decode_tps > best && !res.has_device) {
    rec = "host (in place): fastest decode of the placements asked";
  }
  return rec;
}

// A unit's one-pass curve. Its Belady log is kept in the same pass only when the pre-pass
// bounds it within the cap; otherwise the pass counts it, and only a log that proves to be
// within the cap is made, by a second pass (a log that would be dropped is never held).
MrcResult unit_curve(const traces::TraceInput& input, const frontend::TraceBounds& st,
                     const PlanConfig& cfg, ResidencyUnit unit, WorkCount& work) {
  auto tick = [&](std::int64_t) { ++work.done; };
  const bool keep =
      cfg.belady && query_log_bound(st, input.header.geometry, unit) <= cfg.belady_max_entries;
  MrcResult m = miss_ratio_curve(input, st, unit, keep, cfg.belady_max_entries, tick);
  if (cfg.belady && !keep) {
    if (m.log_entries <= cfg.belady_max_entries) {
      work.total += static_cast<std::uint64_t>(st.forwards);
      m = miss_ratio_curve(input, st, unit, true, cfg.belady_max_entries, tick);
    } else {
      m.log.dropped = true;
    }
  }
  return m;
}

// The simulations of the sweep in as many passes over the trace as there are threads (each
// pass one simulate_together: one decode and one compaction for all its configurations),
// balanced by a rough cost: a pool per layer and a high miss ratio replay slower.
std::vector<std::vector<std::size_t>> sweep_passes(const std::vector<SweepJob>& jobs,
                                                   const PlanResult& res, int threads) {
  std::vector<std::pair<double, std::size_t>> by_cost;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const SweepJob& job = jobs[j];
    if (job.belady) continue;
    double c = 0.5;
    if (job.placement == Placement::mirror) {
      const UnitSweep& us = res.units[static_cast<std::size_t>(job.unit)];
      const double miss = static_cast<double>(us.lru_misses[job.size]) /
                          static_cast<double>(std::max<std::int64_t>(1, us.lookups));
      c = (us.unit == ResidencyUnit::layer_page ? 1.5 : 1.0) * (1 + 2 * miss);
    }
    by_cost.emplace_back(c, j);
  }
  std::stable_sort(by_cost.begin(), by_cost.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const std::size_t n = std::min(by_cost.size(), static_cast<std::size_t>(std::max(1, threads)));
  std::vector<std::vector<std::size_t>> passes(n);
  std::vector<double> load(n, 0);
  for (const auto& [c, j] : by_cost) {
    const auto least =
        static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    passes[least].push_back(j);
    load[least] += c;
  }
  for (auto& p : passes)
    std::sort(p.begin(), p.end());  // the results do not depend on it; the order is stable
  return passes;
}

bool asks_for(const PlanConfig& cfg, Placement p) {
  return std::find(cfg.placements.begin(), cfg.placements.end(), p) != cfg.placements.end();
}

}  // namespace

PlanResult plan(const traces::TraceInput& input, const CostModel& cost, const PlanConfig& cfg) {
  PlanResult res;
  res.trace = input.name;
  res.profile = cost.profile().name;
  res.dtype = cfg.dtype;
  res.policy = cfg.policy;
  res.within = cfg.within;
  res.chosen = cfg.chosen;
  const auto device_capacity =
      static_cast<std::int64_t>(cost.profile().device_memory_gib * 1024.0 * 1024.0 * 1024.0);
  res.device_capacity_bytes = device_capacity;
  if (!(cfg.within > 0 && cfg.within < 1) || !(cfg.chosen > 0 && cfg.chosen < 1)) {
    throw ConfigError("--within and --chosen are percentages between 0 and 100 (exclusive)");
  }
  if (cfg.points < 1 || cfg.points > kMaxPlanPoints) {
    throw ConfigError("--points: 1.." + std::to_string(kMaxPlanPoints) +
                      " automatic sizes (each one a simulation of the whole trace), got " +
                      std::to_string(cfg.points));
  }
  if (cfg.threads < 0 || cfg.threads > kMaxPlanThreads) {
    throw ConfigError("--threads: 0 (every core) .. " + std::to_string(kMaxPlanThreads) + ", got " +
                      std::to_string(cfg.threads));
  }
  auto stage = [&](const std::string& name) {
    if (cfg.on_stage) cfg.on_stage(name);
  };
  stage("scanning the trace");
  res.stats = frontend::scan_trace(input, [&](std::int64_t f) {
    if (cfg.progress) cfg.progress(static_cast<std::uint64_t>(f), 0);
  });
  const frontend::TraceBounds& st = res.stats;
  if (st.forwards == 0) throw ConfigError("trace '" + input.name + "' has no forwards");
  const auto forwards = static_cast<std::uint64_t>(st.forwards);
  const int threads = cfg.threads > 0
                          ? cfg.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const bool want_mirror = asks_for(cfg, Placement::mirror);
  res.has_device = asks_for(cfg, Placement::device);
  res.has_host = asks_for(cfg, Placement::host);

  auto sim_config = [&](const SweepJob& job) {
    SimConfig c;
    c.placement = job.placement;
    c.dtype = cfg.dtype;
    c.check_memory = false;  // the sweep reports sizes beyond the card too, marked
    if (job.placement == Placement::mirror) {
      const UnitSweep& us = res.units[static_cast<std::size_t>(job.unit)];
      c.unit = us.unit;
      c.policy = cfg.policy;
      c.pool_slots = us.sizes[job.size];
    }
    return c;
  };
  auto summary_of = [&](const SweepJob& job) -> PointSummary& {
    if (job.placement == Placement::mirror) {
      return res.units[static_cast<std::size_t>(job.unit)].points[job.size];
    }
    return job.placement == Placement::device ? res.device : res.host;
  };
  // One pass of simulate_together over `pass` (indices into `jobs`), counted in `work`.
  auto run_pass = [&](const std::vector<SweepJob>& jobs, const std::vector<std::size_t>& pass,
                      WorkCount& work) {
    std::vector<SimConfig> cfgs;
    for (std::size_t j : pass)
      cfgs.push_back(sim_config(jobs[j]));
    const std::vector<SimResult> r =
        simulate_together(input, st, cost, cfgs, [&](std::int64_t) { ++work.done; });
    for (std::size_t k = 0; k < pass.size(); ++k)
      summary_of(jobs[pass[k]]) = summarize(r[k], device_capacity);
  };

  // One-pass curves first (one per unit, in parallel): they also give the smallest pool. The
  // device and host placements need no pool size: their pass runs beside the curves.
  std::vector<MrcResult> mrc(want_mirror ? cfg.units.size() : 0);
  std::vector<SweepJob> fixed;  // device, host
  if (res.has_device) fixed.push_back({Placement::device});
  if (res.has_host) fixed.push_back({Placement::host});
  std::vector<std::size_t> fixed_pass(fixed.size());
  for (std::size_t j = 0; j < fixed.size(); ++j)
    fixed_pass[j] = j;
  {
    std::string name;
    if (!mrc.empty()) {
      name = "miss-ratio curves (" + std::to_string(mrc.size()) + " residency unit" +
             (mrc.size() == 1 ? ")" : "s)");
    }
    if (!fixed.empty()) {
      name += std::string(name.empty() ? "" : ", ") +
              (fixed.size() == 2 ? "device and host placements"
                                 : std::string(to_string(fixed[0].placement)) + " placement");
    }
    stage(name);
    WorkCount work;
    work.total = forwards * (mrc.size() + (fixed.empty() ? 0 : 1));
    run_jobs(
        mrc.size() + (fixed.empty() ? 0 : 1), threads,
        [&](std::size_t i) {
          if (i < mrc.size()) {
            mrc[i] = unit_curve(input, st, cfg, cfg.units[i], work);
          } else {
            run_pass(fixed, fixed_pass, work);
          }
        },
        work, cfg.progress);
  }
  res.min_slots = std::int64_t{st.max_rows} + st.max_write_pages;
  for (const auto& m : mrc)
    res.min_slots = std::max(res.min_slots, m.max_step_pages);

  // The mirror sweep: (unit, size) simulations in passes (sweep_passes), then the Belady
  // counts as threads come free.
  std::vector<SweepJob> jobs;
  for (std::size_t u = 0; u < mrc.size(); ++u)
    res.units.push_back(plan_unit(cfg, res, mrc[u], static_cast<int>(u), jobs));
  const std::vector<std::vector<std::size_t>> passes = sweep_passes(jobs, res, threads);
  std::vector<std::size_t> belady_jobs;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].belady) belady_jobs.push_back(j);
  }
  if (!jobs.empty()) {
    const std::size_t sims = jobs.size() - belady_jobs.size();
    stage("mirror sweep: " + std::to_string(sims) +
          (sims == 1 ? " simulation in " : " simulations in ") + std::to_string(passes.size()) +
          (passes.size() == 1 ? " pass" : " passes") +
          (belady_jobs.empty()
               ? std::string()
               : ", " + std::to_string(belady_jobs.size()) +
                     (belady_jobs.size() == 1 ? " Belady bound" : " Belady bounds")));
    WorkCount work;
    work.total = forwards * (passes.size() + belady_jobs.size());
    run_jobs(
        passes.size() + belady_jobs.size(), threads,
        [&](std::size_t i) {
          if (i < passes.size()) {
            run_pass(jobs, passes[i], work);
            return;
          }
          const SweepJob& job = jobs[belady_jobs[i - passes.size()]];
          UnitSweep& us = res.units[static_cast<std::size_t>(job.unit)];
          us.belady_misses[job.size] =
              belady_misses(mrc[static_cast<std::size_t>(job.unit)].log, us.sizes[job.size]);
          work.done += forwards;
        },
        work, cfg.progress);
  }

  for (UnitSweep& us : res.units)
    find_thresholds(us, cfg.within, cfg.chosen);
  res.recommendation = recommend(res, cfg);
  res.rest = rest_of_model(cost.profile());
  res.rest_us = res.rest.total_us(st.forwards, st.decode_tokens + st.prefill_tokens);
  res.trust = trust_line(cost.profile());
  auto split = [&](PointSummary& p) { p.qsa_us = p.forward_us - res.rest_us; };
  split(res.device);
  split(res.host);
  for (UnitSweep& us : res.units)
    std::for_each(us.points.begin(), us.points.end(), split);
  return res;
}

namespace {

namespace json = boost::json;

json::object point_json(const PointSummary& p) {
  json::array layers;
  for (double h : p.layer_hit_rate) {
    if (p.has_lookups) {
      layers.push_back(h);
    } else {
      layers.push_back(nullptr);
    }
  }
  return {{"decode_tokens_per_s", p.decode_tps},
          {"prefill_tokens_per_s", p.prefill_tps},
          {"hit_rate", p.has_lookups ? json::value(p.hit_rate) : json::value(nullptr)},
          {"misses", p.misses},
          {"drops", p.drops},
          {"h2d_bytes", p.h2d_bytes},
          {"d2h_bytes", p.d2h_bytes},
          {"h2d_utilisation", p.h2d_util},
          {"device_bytes", p.device_bytes},
          {"fits_device", p.fits_device},
          {"forward_us", p.forward_us},
          {"qsa_stack_us", p.qsa_us},
          {"layer_hit_rate", std::move(layers)}};
}

}  // namespace

std::string plan_to_json(const PlanResult& r) {
  json::object o;
  o["trace"] = r.trace;
  o["profile"] = r.profile;
  o["dtype"] = std::string(to_string(r.dtype));
  o["policy"] = std::string(to_string(r.policy));
  o["within"] = r.within;
  o["chosen"] = r.chosen;
  o["stats"] = {
      {"forwards", r.stats.forwards},           {"requests", r.stats.requests},
      {"decode_tokens", r.stats.decode_tokens}, {"prefill_tokens", r.stats.prefill_tokens},
      {"peak_pages", r.stats.peak_pages},       {"max_rows", r.stats.max_rows},
      {"max_context", r.stats.max_context}};
  o["min_slots"] = r.min_slots;
  o["device_capacity_bytes"] = r.device_capacity_bytes;
  if (r.has_device) o["device"] = point_json(r.device);
  if (r.has_host) o["host"] = point_json(r.host);
  json::array units;
  for (const UnitSweep& us : r.units) {
    json::array pts;
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      json::object p = point_json(us.points[i]);
      p["slots"] = us.sizes[i];
      p["lru_misses_mrc"] = us.lru_misses[i];
      if (!us.belady_misses.empty()) p["belady_misses"] = us.belady_misses[i];
      pts.push_back(std::move(p));
    }
    units.push_back({{"unit", std::string(to_string(us.unit))},
                     {"lookups", us.lookups},
                     {"cliff_slots", us.cliff_slots},
                     {"within_slots", us.within_slots},
                     {"chosen_slots", us.chosen_slots},
                     {"belady", us.belady_note.empty() ? "computed" : us.belady_note},
                     {"points", std::move(pts)}});
  }
  o["mirror"] = std::move(units);
  o["recommendation"] = r.recommendation;
  o["rest_of_model"] = rest_of_model_json(r.rest, r.rest_us);
  o["trust"] = r.trust;
  return json::serialize(o);
}

}  // namespace kvtier::sim
