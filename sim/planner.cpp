#include "sim/planner.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <limits>
#include <thread>

#include "model/config_error.hpp"
#include "model/memory_budget.hpp"
#include "model/profile_trust.hpp"
#include "sim/micro_batch_groups.hpp"
#include "sim/plan_jobs.hpp"
#include "sim/replay_config.hpp"

namespace kvtier::sim {

PointSummary summarize(const SimResult& r, std::int64_t device_capacity_bytes) {
  PointSummary s;
  s.device_bytes = r.device_bytes;
  s.host_bytes = r.host_bytes;
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
  // Each decode token waits for the whole forward it is produced in (a mixed forward's
  // prefill rows included): the token-weighted mean of those spans.
  double tokens = 0, waited_ns = 0;
  for (const ForwardTime& f : r.forwards_detail) {
    tokens += static_cast<double>(f.decode_tokens);
    waited_ns += static_cast<double>(f.decode_tokens) * static_cast<double>(f.span_ns);
  }
  s.decode_step_ms = tokens > 0 ? waited_ns / tokens / 1e6 : 0;
  s.ttft_p50_us = r.latency.ttft_ns.p50 / 1e3;
  s.ttft_p95_us = r.latency.ttft_ns.p95 / 1e3;
  s.tpot_p50_us = r.latency.tpot_ns.p50 / 1e3;
  s.tpot_p95_us = r.latency.tpot_ns.p95 / 1e3;
  s.tpot_p99_us = r.latency.tpot_ns.p99 / 1e3;
  for (const auto& l : r.layers) {
    s.layer_hit_rate.push_back(
        l.lookups > 0 ? static_cast<double>(l.hits) / static_cast<double>(l.lookups) : 1.0);
  }
  return s;
}

namespace {

std::string gib(std::int64_t bytes) {
  return gib_text(bytes, 1);
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
    us.classic_lru_misses.push_back(mrc.curve.misses(s));
  us.points.resize(us.sizes.size());
  const bool belady = cfg.belady && !mrc.log.dropped;
  if (cfg.belady && mrc.log.dropped) {
    us.belady_note = "skipped: the trace's query log is over " +
                     std::to_string(cfg.belady_max_entries) + " entries";
  }
  // Every first reference misses under any policy, and Belady <= classic LRU (a policy that
  // keeps a step's pages resident once the pool holds the largest step, as every size here
  // does): where classic LRU has only those compulsory misses, so has Belady. A bound, not
  // an estimate: it only spares a run and gives the exact Belady figure.
  const std::int64_t compulsory = mrc.curve.misses(std::numeric_limits<std::int64_t>::max());
  if (belady) us.belady_misses.assign(us.sizes.size(), kNoBelady);
  for (std::size_t i = 0; i < us.sizes.size(); ++i) {
    jobs.push_back({Placement::mirror, u, i, false});
    if (!belady) continue;
    // The curves admit every row's whole selection; a pool that cannot hold the log's largest
    // step (the core bypasses it with wide prefill rows) has no Belady figure.
    if (us.sizes[i] < mrc.max_step_pages) continue;
    if (us.classic_lru_misses[i] == compulsory) {
      us.belady_misses[i] = compulsory;
    } else {
      jobs.push_back({Placement::mirror, u, i, true});
    }
  }
  return us;
}

// The cliff: the size below which decode tokens/s falls fastest per slot. The within and
// chosen sizes are the decision's (recommend.hpp): measured against the recommendation, which
// fits the budget, rather than against the mirror's own all-resident speed, which may not.
void find_thresholds(UnitSweep& us, const Recommendation& decision) {
  double steepest = -1;
  for (std::size_t i = 1; i < us.sizes.size(); ++i) {
    const double drop = (us.points[i].decode_tps - us.points[i - 1].decode_tps) /
                        static_cast<double>(us.sizes[i] - us.sizes[i - 1]);
    if (drop > steepest) {
      steepest = drop;
      us.cliff_slots = us.sizes[i];
    }
  }
  for (const MirrorSizes& m : decision.mirror) {
    if (m.unit != us.unit) continue;
    us.within_slots = m.within_slots;
    us.chosen_slots = m.chosen_slots;
  }
}

// The decision over every configuration simulated, under the budget (recommend.hpp).
Recommendation decision_of(const PlanResult& res, const PlanConfig& cfg) {
  RecommendInput in;
  in.objective = cfg.objective;
  in.within = cfg.within;
  in.chosen = cfg.chosen;
  in.budget = res.budget;
  in.host_capacity_bytes = res.host_capacity_bytes;
  in.ideal = &res.ideal;
  in.device = res.has_device ? &res.device : nullptr;
  in.host = res.has_host ? &res.host : nullptr;
  in.units = res.units;
  return recommend(in);
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
      const double miss = static_cast<double>(us.classic_lru_misses[job.size]) /
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

// The device placement (the ideal) runs one batch, and so does host fp8, whose groups the
// simulator does not price (prices_micro_batches).
int micro_batches_of(const PlanConfig& cfg, Placement p) {
  return prices_micro_batches(p, cfg.dtype) ? cfg.micro_batches : 1;
}

bool asks_for(const PlanConfig& cfg, Placement p) {
  return std::find(cfg.placements.begin(), cfg.placements.end(), p) != cfg.placements.end();
}

}  // namespace

void decide(PlanResult& res, const PlanConfig& cfg) {
  res.decision = decision_of(res, cfg);
  res.recommendation = res.decision.sentence;
  for (UnitSweep& us : res.units)
    find_thresholds(us, res.decision);
}

PlanResult plan(const traces::TraceInput& input, const CostModel& cost, const PlanConfig& cfg) {
  PlanResult res;
  res.trace = input.name;
  res.profile = cost.profile().name;
  res.dtype = cfg.dtype;
  res.policy = cfg.policy;
  res.within = cfg.within;
  res.chosen = cfg.chosen;
  const auto card = gib_to_bytes(cost.profile().device_memory_gib);
  res.device_capacity_bytes = card;
  if (cfg.device_kv_bytes < 0 || cfg.device_kv_bytes > card) {
    throw ConfigError(
        "--device-kv-gib: the device memory the KV tier may use is at most the "
        "card's (profile " +
        cost.profile().name + ": " + gib(card) + ")");
  }
  res.budget.card_bytes = card;
  res.budget.kv_is_card = cfg.device_kv_bytes == 0;
  res.budget.kv_bytes = res.budget.kv_is_card ? card : cfg.device_kv_bytes;
  res.host_capacity_bytes = cfg.host_capacity_bytes;
  const std::int64_t device_capacity = res.budget.kv_bytes;
  if (cfg.host_capacity_bytes < 0) throw ConfigError("--host-gib: must not be negative");
  if (cfg.objective.kind == Objective::tpot &&
      !(cfg.objective.tpot_target_ms > 0 && std::isfinite(cfg.objective.tpot_target_ms))) {
    throw ConfigError("--tpot-ms: a positive number of milliseconds per output token");
  }
  if (!(cfg.within > 0 && cfg.within < 1) || !(cfg.chosen > 0 && cfg.chosen < 1)) {
    throw ConfigError("--within and --chosen are percentages between 0 and 100 (exclusive)");
  }
  if (cfg.points < 1 || cfg.points > kMaxPlanPoints) {
    throw ConfigError("--points: 1.." + std::to_string(kMaxPlanPoints) +
                      " automatic sizes (each one a simulation of the whole trace), got " +
                      std::to_string(cfg.points));
  }
  if (cfg.micro_batches < 1 || cfg.micro_batches > kMaxSimMicroBatches) {
    throw ConfigError("--micro-batches: 1.." + std::to_string(kMaxSimMicroBatches) +
                      " groups, got " + std::to_string(cfg.micro_batches));
  }
  res.micro_batches = cfg.micro_batches;
  res.micro_batches_auto = cfg.micro_batches_auto;
  res.host_micro_batches = micro_batches_of(cfg, Placement::host);
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
    c.check_memory = false;    // the sweep reports sizes beyond the card too, marked
    c.record_forwards = true;  // each forward's span: the decode tokens' wait (TPOT)
    c.micro_batches = micro_batches_of(cfg, job.placement);
    if (job.placement == Placement::mirror) {
      const UnitSweep& us = res.units[static_cast<std::size_t>(job.unit)];
      c.unit = us.unit;
      c.policy = cfg.policy;
      c.pool_slots = us.sizes[job.size];
    }
    if (cfg.micro_batches_auto) {
      c.micro_batches = auto_micro_batches(cost, input.header.geometry, res.stats, job.placement,
                                           cfg.dtype, c.pool_slots);
    }
    return c;
  };
  auto summary_of = [&](const SweepJob& job) -> PointSummary& {
    if (job.placement == Placement::mirror) {
      return res.units[static_cast<std::size_t>(job.unit)].points[job.size];
    }
    return job.placement == Placement::device ? res.ideal : res.host;
  };
  // One pass of simulate_together over `pass` (indices into `jobs`), counted in `work`.
  auto run_pass = [&](const std::vector<SweepJob>& jobs, const std::vector<std::size_t>& pass,
                      WorkCount& work) {
    std::vector<SimConfig> cfgs;
    for (std::size_t j : pass)
      cfgs.push_back(sim_config(jobs[j]));
    const std::vector<SimResult> r =
        simulate_together(input, st, cost, cfgs, [&](std::int64_t) { ++work.done; });
    for (std::size_t k = 0; k < pass.size(); ++k) {
      PointSummary& point = summary_of(jobs[pass[k]]);
      point = summarize(r[k], device_capacity);
      point.micro_batches = cfgs[k].micro_batches;
    }
  };

  // One-pass curves first (one per unit, in parallel): they also give the smallest pool. The
  // device and host placements need no pool size: their pass runs beside the curves.
  std::vector<MrcResult> mrc(want_mirror ? cfg.units.size() : 0);
  std::vector<SweepJob> fixed;  // device (always: the ideal), host
  fixed.push_back({Placement::device});
  if (res.has_host) fixed.push_back({Placement::host});
  std::vector<std::size_t> fixed_pass(fixed.size());
  for (std::size_t j = 0; j < fixed.size(); ++j)
    fixed_pass[j] = j;
  {
    std::string name;
    if (!mrc.empty()) {
      name = "miss-ratio curves (" + std::to_string(mrc.size()) + " residency unit" +
             (mrc.size() == 1 ? "), " : "s), ");
    }
    // Device runs whether asked for or not: it is the ideal every decision is measured by.
    name += fixed.size() == 2 ? "device and host placements" : "device placement";
    stage(name);
    WorkCount work;
    work.total = forwards * (mrc.size() + 1);
    run_jobs(
        mrc.size() + 1, threads,
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
    res.min_slots = std::max(res.min_slots, m.max_pool_step_pages);
  if (cfg.micro_batches_auto) {
    res.host_micro_batches =
        auto_micro_batches(cost, input.header.geometry, res.stats, Placement::host, cfg.dtype, 0);
  } else if (const int k = cfg.micro_batches; k > 1) {
    // Each group's pool holds its share of the widest step: the pools together K such shares.
    res.min_slots = std::max(res.min_slots, group_min_pool(st, k) * k);
  }

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

  res.rest = rest_of_model(cost.profile());
  res.rest_us = res.rest.total_us(st.forwards, st.decode_tokens + st.prefill_tokens);
  res.trust = trust_line(cost.profile());
  auto split = [&](PointSummary& p) { p.qsa_us = p.forward_us - res.rest_us; };
  split(res.ideal);
  split(res.host);
  for (UnitSweep& us : res.units)
    std::for_each(us.points.begin(), us.points.end(), split);
  if (res.has_device) res.device = res.ideal;
  decide(res, cfg);
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
          {"host_bytes", p.host_bytes},
          {"decode_step_ms", p.decode_step_ms},
          {"ttft_p50_us", p.ttft_p50_us},
          {"ttft_p95_us", p.ttft_p95_us},
          {"tpot_p50_us", p.tpot_p50_us},
          {"tpot_p95_us", p.tpot_p95_us},
          {"tpot_p99_us", p.tpot_p99_us},
          {"micro_batches", p.micro_batches},
          {"layer_hit_rate", std::move(layers)}};
}

}  // namespace

std::string micro_batches_note(const PlanResult& r, bool which) {
  const std::string trust =
      " The groups' overlap is priced as the link and the SMs allow: against the H200's host "
      "steps in 2 and 4 groups the simulator was 1 - 7 % fast, and its gain over one batch larger "
      "than measured (32 x 128k in 2 groups: 6.6 % against 2.5 %; "
      "validation/results/sim-micro-batches-2026-12-04.md)";
  if (r.micro_batches_auto) {
    std::string taken;
    if (r.has_host && r.host.micro_batches > 1)
      taken = "host in " + std::to_string(r.host.micro_batches);
    int mirror = 0;
    for (const UnitSweep& us : r.units)
      for (const PointSummary& p : us.points)
        mirror += p.micro_batches > 1 ? 1 : 0;
    if (mirror > 0)
      taken += (taken.empty() ? "" : ", ") + std::to_string(mirror) + " mirror size" +
               (mirror == 1 ? "" : "s") + " in groups";
    const std::string rule =
        "micro-batches auto: each host and mirror configuration in the groups `kvtier run "
        "--micro-batches auto` would take for this trace's widest forward (the \"groups\" "
        "column)";
    if (!which) return rule + "." + trust;
    if (taken.empty()) return rule + "; every one in one batch here";
    return rule + ": " + taken + "." + trust;
  }
  if (r.micro_batches <= 1) return "";
  const bool host = r.host_micro_batches > 1;
  return std::string(host ? "host and mirror" : "mirror") + " in " +
         std::to_string(r.micro_batches) +
         " micro-batches: a forward of decode rows runs the groups' forwards at once, any other "
         "one group after another; " +
         (host ? "the device placement"
               : "the device placement and host fp8 (its groups not priced)") +
         " in one batch." + trust;
}

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
  o["micro_batches"] = r.micro_batches;
  o["micro_batches_auto"] = r.micro_batches_auto;
  o["host_micro_batches"] = r.host_micro_batches;
  o["device_capacity_bytes"] = r.device_capacity_bytes;
  o["device_kv_budget_bytes"] = r.budget.kv_bytes;
  o["device_kv_budget_is_card"] = r.budget.kv_is_card;
  o["left_for_weights_bytes"] = r.budget.left_bytes();
  o["host_capacity_bytes"] = r.host_capacity_bytes;
  o["ideal"] = point_json(r.ideal);
  if (r.has_device) o["device"] = point_json(r.device);
  if (r.has_host) o["host"] = point_json(r.host);
  json::array units;
  for (const UnitSweep& us : r.units) {
    json::array pts;
    for (std::size_t i = 0; i < us.sizes.size(); ++i) {
      json::object p = point_json(us.points[i]);
      p["slots"] = us.sizes[i];
      // Renamed from "lru_misses_mrc": the curve is classic LRU, not the core's ("misses").
      p["classic_lru_misses"] = us.classic_lru_misses[i];
      if (!us.belady_misses.empty()) {
        p["belady_misses"] = us.belady_misses[i] == kNoBelady ? json::value(nullptr)
                                                              : json::value(us.belady_misses[i]);
      }
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
  o["decision"] = to_json(r.decision);
  o["rest_of_model"] = rest_of_model_json(r.rest, r.rest_us);
  o["trust"] = r.trust;
  return json::serialize(o);
}

}  // namespace kvtier::sim
