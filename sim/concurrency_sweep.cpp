#include "sim/concurrency_sweep.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "io/pending_output.hpp"
#include "model/config_error.hpp"
#include "model/memory_budget.hpp"
#include "traces/trace_io.hpp"

namespace kvtier::sim {

traces::GenParams level_workload(const traces::GenParams& base, std::int64_t level) {
  traces::GenParams p = base;
  p.requests = static_cast<int>(level);
  p.concurrent = static_cast<int>(level);
  return p;
}

void check_levels(const std::vector<std::int64_t>& levels, const Geometry& g,
                  const traces::GenParams& base) {
  if (levels.empty()) throw ConfigError("--concurrency: give at least one level, e.g. 1,8,32");
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const std::int64_t n = levels[i];
    if (n < 1 || n > kMaxConcurrency) {
      throw ConfigError("--concurrency: each level is 1.." + std::to_string(kMaxConcurrency) +
                        " requests in flight, got " + std::to_string(n));
    }
    if (std::find(levels.begin(), levels.begin() + static_cast<std::ptrdiff_t>(i), n) !=
        levels.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw ConfigError("--concurrency: level " + std::to_string(n) + " is given twice");
    }
    // The generator keeps, per request and QSA layer, a ranking of every indexer block and a
    // membership byte: ~5 B per block. Doubles: no overflow for any level this far.
    const std::int64_t context = base.fill_depth + base.prompt_max + base.decode_max;
    const double blocks = static_cast<double>(context) / static_cast<double>(g.compress_ratio) + 1;
    const double bytes = static_cast<double>(n) * g.qsa_layers() * blocks * 5;
    if (bytes > static_cast<double>(kMaxGeneratorStateBytes)) {
      throw ConfigError("--concurrency: level " + std::to_string(n) + " holds " +
                        std::to_string(n) + " requests of " + std::to_string(context) +
                        " tokens in flight, whose generator state needs " + gib_text(bytes) +
                        " (at most 1 GiB): lower the level or the prompt");
    }
  }
}

// Never committed: the temporary is removed by the destructor and by the signal handler.
struct LevelTrace::File {
  io::PendingOutput out;
  explicit File(std::string path) : out(std::move(path)) {}
};

namespace {

// A name of this process's own in the temporary directory.
std::string temporary_path() {
  static std::atomic<int> counter{0};
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  return (dir / ("kvtier-concurrency-" + std::to_string(::getpid()) + "-" +
                 std::to_string(counter++) + ".ktr"))
      .string();
}

}  // namespace

LevelTrace::LevelTrace(const Geometry& g, const traces::GenParams& workload,
                       const std::string& name)
    : file_(std::make_unique<File>(temporary_path())) {
  traces::TraceGenerator gen(g, workload);  // checks the parameters before anything is written
  traces::TraceHeader h;
  h.geometry = g;
  h.producer = "kvtier plan --concurrency: " + name;
  h.created = "1970-01-01T00:00:00Z";  // fixed: the same inputs give the same trace
  traces::WriterOptions wo;
  wo.zstd_level = 1;  // read back a few dozen times, written once: fast beats small
  {
    auto writer =
        traces::TraceWriter::create(file_->out.write_path(), h, traces::TraceFormat::binary, wo);
    traces::Record r;
    while (gen.next(r))
      writer->write(r);
    writer->close();
  }
  input_ = traces::file_trace(file_->out.write_path());
  input_.name = name;  // not the temporary's path: outputs must not depend on it
}

LevelTrace::~LevelTrace() = default;

const std::string& LevelTrace::path() const {
  return file_->out.write_path();
}

std::vector<LevelPoint> level_points(const PlanResult& plan) {
  std::vector<LevelPoint> pts;
  if (plan.has_device) pts.push_back({Placement::device, {}, 0, "", plan.device});
  if (plan.has_host) pts.push_back({Placement::host, {}, 0, "", plan.host});
  auto pct = [](double f) { return std::to_string(static_cast<int>(std::lround(f * 100))) + " %"; };
  for (const UnitSweep& us : plan.units) {
    if (us.sizes.empty()) continue;
    std::int64_t slots = us.sizes.back();
    std::string rule = "largest swept (none fits)";
    if (us.within_slots != 0) {
      slots = us.within_slots;
      rule = "within " + pct(plan.within);
    } else if (us.chosen_slots != 0) {
      slots = us.chosen_slots;
      rule = "within " + pct(plan.chosen);
    } else {
      // None close to the recommendation: the unit's best that fits and drops nothing (the
      // decision's alternative for it), so that the row shows what the budget allows, not a
      // pool it cannot hold.
      const auto& alt = plan.decision.alternatives;
      const auto fits = std::find_if(alt.begin(), alt.end(), [&us](const ConfigFigures& a) {
        return a.placement == Placement::mirror && a.unit == us.unit;
      });
      if (fits != alt.end()) {
        slots = fits->slots;
        rule = "fastest that fits (none within " + pct(plan.chosen) + ")";
      }
    }
    const auto i = static_cast<std::size_t>(std::find(us.sizes.begin(), us.sizes.end(), slots) -
                                            us.sizes.begin());
    if (i == us.sizes.size()) throw std::logic_error("level_points: a size the sweep lacks");
    pts.push_back({Placement::mirror, us.unit, slots, rule, us.points[i]});
  }
  return pts;
}

ConcurrencyResult concurrency_sweep(const CostModel& cost, const ConcurrencyConfig& cfg) {
  check_levels(cfg.levels, cfg.geometry, cfg.workload);
  ConcurrencyResult res;
  res.profile = cost.profile().name;
  res.preset = cfg.preset;
  res.workload = cfg.workload;
  for (std::size_t i = 0; i < cfg.levels.size(); ++i) {
    const std::int64_t n = cfg.levels[i];
    if (cfg.on_level_start) cfg.on_level_start(i, n);
    const traces::GenParams w = level_workload(cfg.workload, n);
    const std::string depth =
        w.fill_depth > 0 ? " at depth " + std::to_string(w.fill_depth) + " (filled)" : "";
    const std::string name = "generated: " + std::to_string(n) + " requests in flight of " +
                             std::to_string(w.prompt_max) + " prompt + " +
                             std::to_string(w.decode_max) + " decode tokens" + depth + ", preset " +
                             cfg.preset + ", seed " + std::to_string(w.seed);
    ConcurrencyLevel level;
    level.concurrency = n;
    {
      const LevelTrace trace(cfg.geometry, w, name);
      level.plan = plan(trace.input(), cost, cfg.plan);
    }  // the temporary goes as soon as the level is planned
    level.points = level_points(level.plan);
    if (cfg.on_level_done) cfg.on_level_done(i, level);
    res.levels.push_back(std::move(level));
  }
  return res;
}

namespace {

namespace json = boost::json;

// A point as `kvtier plan --json` gives it, found in that level's plan JSON.
json::object point_object(const json::object& plan, const LevelPoint& p) {
  json::object o;
  o["placement"] = std::string(to_string(p.placement));
  if (p.placement != Placement::mirror) {
    for (const auto& kv : plan.at(p.placement == Placement::device ? "device" : "host").as_object())
      o[kv.key()] = kv.value();
    return o;
  }
  o["unit"] = std::string(to_string(p.unit));
  o["size_rule"] = p.size_rule;
  for (const auto& u : plan.at("mirror").as_array()) {
    if (u.as_object().at("unit").as_string() != to_string(p.unit)) continue;
    for (const auto& pt : u.as_object().at("points").as_array()) {
      if (pt.as_object().at("slots").as_int64() != p.slots) continue;
      for (const auto& kv : pt.as_object())
        o[kv.key()] = kv.value();
    }
  }
  return o;
}

}  // namespace

std::string concurrency_to_json(const ConcurrencyResult& r) {
  json::object o;
  o["profile"] = r.profile;
  o["workload"] = {
      {"preset", r.preset},
      {"fill_depth", r.workload.fill_depth},
      {"prompt_tokens", r.workload.prompt_max},
      {"decode_tokens", r.workload.decode_max},
      {"prefill_chunk", r.workload.prefill_chunk},
      {"seed", r.workload.seed},
      {"how",
       r.workload.fill_depth > 0
           ? "each level: that many requests, all admitted at once at fill_depth (the tokens "
             "before it in the KV cache already, not prefilled), their prompts prefilled together "
             "in chunks, then decoding together; one wave, no arrivals over time"
           : "each level: that many requests, all admitted at once (prefilled together in chunks, "
             "then decoding together); one wave, no arrivals over time"}};
  json::array levels;
  for (const ConcurrencyLevel& l : r.levels) {
    const json::object plan = json::parse(plan_to_json(l.plan)).as_object();
    json::array pts;
    for (const LevelPoint& p : l.points)
      pts.push_back(point_object(plan, p));
    levels.push_back({{"concurrency", l.concurrency},
                      {"requests", l.plan.stats.requests},
                      {"max_rows", l.plan.stats.max_rows},
                      {"points", std::move(pts)},
                      {"recommendation", l.plan.recommendation},
                      {"plan", plan}});
  }
  o["levels"] = std::move(levels);
  return json::serialize(o);
}

}  // namespace kvtier::sim
