#include "sim/planner.hpp"

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <cmath>
#include <limits>
#include <mutex>
#include <thread>

#include "model/config_error.hpp"
#include "model/profile_trust.hpp"

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
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// Runs jobs[0..n) on `threads` threads; each job writes only its own result slot.
void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& job,
                  const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex err_mu;
  std::exception_ptr err;
  // Takes jobs until none is left; the first exception is kept and rethrown at the end.
  auto work = [&](bool reports) {
    for (std::size_t i = next++; i < n; i = next++) {
      try {
        job(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!err) err = std::current_exception();
      }
      ++done;
      if (reports && progress) progress(done, n);
    }
  };
  std::vector<std::thread> pool;
  const int t = std::max(1, std::min<int>(threads, static_cast<int>(n)));
  for (int i = 1; i < t; ++i)
    pool.emplace_back(work, false);
  work(true);  // the calling thread works too and reports progress between its jobs
  for (auto& th : pool)
    th.join();
  if (progress) progress(n, n);
  if (err) std::rethrow_exception(err);
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
  if (cfg.threads < 0 || cfg.threads > kMaxPlanThreads) {
    throw ConfigError("--threads: 0 (every core) .. " + std::to_string(kMaxPlanThreads) + ", got " +
                      std::to_string(cfg.threads));
  }
  res.stats = frontend::scan_trace(input);
  const frontend::TraceBounds& st = res.stats;
  if (st.forwards == 0) throw ConfigError("trace '" + input.name + "' has no forwards");
  const int threads = cfg.threads > 0
                          ? cfg.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const bool want_mirror = asks_for(cfg, Placement::mirror);
  res.has_device = asks_for(cfg, Placement::device);
  res.has_host = asks_for(cfg, Placement::host);

  // One-pass curves first (one per unit, in parallel): they also give the smallest pool.
  std::vector<MrcResult> mrc(want_mirror ? cfg.units.size() : 0);
  parallel_for(
      mrc.size(), threads,
      [&](std::size_t i) {
        mrc[i] = miss_ratio_curve(input, st, cfg.units[i], cfg.belady, cfg.belady_max_entries);
      },
      nullptr);
  res.min_slots = std::int64_t{st.max_rows} + st.max_write_pages;
  for (const auto& m : mrc)
    res.min_slots = std::max(res.min_slots, m.max_pool_step_pages);

  // Jobs: device (always: the ideal), host, then (unit, size) mirror simulations and Belady
  // counts.
  std::vector<SweepJob> jobs;
  jobs.push_back({Placement::device});
  if (res.has_host) jobs.push_back({Placement::host});
  for (std::size_t u = 0; u < mrc.size(); ++u)
    res.units.push_back(plan_unit(cfg, res, mrc[u], static_cast<int>(u), jobs));
  parallel_for(
      jobs.size(), threads,
      [&](std::size_t j) {
        const SweepJob& job = jobs[j];
        if (job.belady) {
          UnitSweep& us = res.units[job.unit];
          us.belady_misses[job.size] = belady_misses(mrc[job.unit].log, us.sizes[job.size]);
          return;
        }
        SimConfig c;
        c.placement = job.placement;
        c.dtype = cfg.dtype;
        c.check_memory = false;    // the sweep reports sizes beyond the card too, marked
        c.record_forwards = true;  // each forward's span: the decode tokens' wait (TPOT)
        if (job.placement == Placement::mirror) {
          UnitSweep& us = res.units[job.unit];
          c.unit = us.unit;
          c.policy = cfg.policy;
          c.pool_slots = us.sizes[job.size];
          us.points[job.size] = summarize(simulate(input, st, cost, c), device_capacity);
        } else {
          (job.placement == Placement::device ? res.ideal : res.host) =
              summarize(simulate(input, st, cost, c), device_capacity);
        }
      },
      cfg.progress);

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
