#pragma once
// Concurrency as a dimension of the plan: the same workload at several numbers of requests in
// flight, so that "how many users at 128k on this card" is one command (`kvtier plan
// --concurrency 1,8,32 --prompt 131072 --decode 64`; docs/planner.md, "Concurrency").
//
// Each level is a generated trace (traces/generator.hpp): `level` requests of the same prompt
// and decode length, all admitted at once, so `level` requests are in flight from the first
// forward: their prompts are prefilled together in chunks, then they decode together, one row
// each per forward, until they end together. One wave, no arrivals over time: TTFT is that of
// `level` users who arrive at the same moment. The planner runs on each level as on any trace.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/planner.hpp"
#include "traces/generator.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::sim {

// The most requests one level may hold in flight, and the most memory the generator's state
// for them may take (a request's selection state is ~5 B per indexer block per QSA layer).
inline constexpr std::int64_t kMaxConcurrency = 1024;
inline constexpr std::int64_t kMaxGeneratorStateBytes = std::int64_t{1} << 30;

// The workload at one level: `base` with `level` requests, all in flight at once.
traces::GenParams level_workload(const traces::GenParams& base, std::int64_t level);

// Throws ConfigError naming --concurrency for an empty list, a level outside
// 1..kMaxConcurrency, a level given twice, or a level whose requests' generator state would
// pass kMaxGeneratorStateBytes.
void check_levels(const std::vector<std::int64_t>& levels, const Geometry& g,
                  const traces::GenParams& base);

// One level's trace, generated once into a temporary binary trace file and read from there as
// often as the plan needs (regenerating it for every pass would cost more than simulating it).
// The file is removed when this object goes, and on SIGINT / SIGTERM / SIGHUP (io::PendingOutput).
class LevelTrace {
 public:
  LevelTrace(const Geometry& g, const traces::GenParams& workload, const std::string& name);
  ~LevelTrace();
  LevelTrace(const LevelTrace&) = delete;
  LevelTrace& operator=(const LevelTrace&) = delete;
  const traces::TraceInput& input() const { return input_; }
  const std::string& path() const;  // the temporary file (for tests)

 private:
  struct File;
  std::unique_ptr<File> file_;
  traces::TraceInput input_;
};

// One placement at one level: device, host, or mirror of one residency unit at the size the
// plan picked for it.
struct LevelPoint {
  Placement placement = Placement::device;
  ResidencyUnit unit = ResidencyUnit::layer_page;  // mirror only
  std::int64_t slots = 0;                          // mirror only
  // Mirror: why this size: "within 5 %" (the plan's within size), "within 10 %" (its chosen
  // size), else "fastest that fits (none within 10 %)" (the unit's best that fits the budget
  // and drops nothing), else "largest swept (none fits)".
  std::string size_rule;
  PointSummary point;
};

struct ConcurrencyLevel {
  std::int64_t concurrency = 0;
  PlanResult plan;
  std::vector<LevelPoint> points;  // device, host, then mirror per unit, as the plan asked
};

struct ConcurrencyConfig {
  std::vector<std::int64_t> levels;  // in the order given (check_levels)
  Geometry geometry;
  traces::GenParams workload;  // requests and concurrent are set per level
  std::string preset;          // the generator preset `workload` came from, for the report
  PlanConfig plan;             // what the planner does at every level
  // Before a level's trace is generated, and once its plan is done (progress lines).
  std::function<void(std::size_t index, std::int64_t level)> on_level_start;
  std::function<void(std::size_t index, const ConcurrencyLevel&)> on_level_done;
};

struct ConcurrencyResult {
  std::string profile;
  std::string preset;
  traces::GenParams workload;
  std::vector<ConcurrencyLevel> levels;
};

// Plans every level (check_levels first). Deterministic: the same inputs give the same figures.
ConcurrencyResult concurrency_sweep(const CostModel& cost, const ConcurrencyConfig& cfg);

// The points of one level's plan: device and host as planned; mirror per unit at its within
// size, else its chosen size, else its largest.
std::vector<LevelPoint> level_points(const PlanResult& plan);

// Every figure as JSON: the workload, and per level its points and its whole plan (the same
// object as `kvtier plan --json` prints for that level's trace).
std::string concurrency_to_json(const ConcurrencyResult& r);

}  // namespace kvtier::sim
