#pragma once
// The planner's decision (docs/planner.md, "The recommendation"): every configuration swept
// that fits the device budget B (and the host RAM, when given) and drops no selected page is
// ranked by the user's objective; the best is recommended, and the sentence says why: against
// the runner-up, against the ideal (the device placement with unlimited memory), the smallest
// mirror pool within --within of the recommendation, and -- when nothing fits -- what is
// missing. A pure function of the simulated summaries and the budget, so that every branch is
// tested on hand-made figures.
#include <boost/json/object.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/device_budget.hpp"
#include "model/placement.hpp"

namespace kvtier::sim {

struct PointSummary;
struct UnitSweep;

enum class Objective : std::uint8_t {
  decode,   // decode tokens/s (the default)
  prefill,  // prefill tokens/s
  tpot,     // a time-per-output-token target: the fastest decode among those that meet it
};
std::string_view to_string(Objective o);

struct ObjectiveSpec {
  Objective kind = Objective::decode;
  double tpot_target_ms = 0;  // Objective::tpot
};

// The per-token time a request sees in decode, in ms: the figure a TPOT target is held
// against. The p95 of every decode token's gap to its request's previous token
// (PointSummary::tpot_p95_us; a decode row in a mixed forward waits for all of it); for a
// summary without per-token gaps, the mean span of the forward each decode token waits for
// (PointSummary::decode_step_ms).
double tpot_ms(const PointSummary& p);

// One configuration with the figures the decision uses.
struct ConfigFigures {
  Placement placement = Placement::device;
  ResidencyUnit unit = ResidencyUnit::layer_page;  // mirror only
  std::int64_t slots = 0;                          // mirror only
  double decode_tps = 0, prefill_tps = 0, tpot_ms = 0;
  std::int64_t device_bytes = 0, host_bytes = 0, drops = 0;
};
// "device", "host (in place)", "mirror, layer unit, 8,499 slots".
std::string describe(const ConfigFigures& c);

// The smallest pool of a mirror unit within --within (and --chosen) of the reference.
struct MirrorSizes {
  ResidencyUnit unit = ResidencyUnit::layer_page;
  std::int64_t within_slots = 0;  // 0: no size swept qualifies
  std::int64_t within_device_bytes = 0;
  std::int64_t chosen_slots = 0;
};

struct Recommendation {
  ObjectiveSpec objective;
  bool found = false;        // a configuration fits and drops nothing
  bool meets_target = true;  // Objective::tpot: the chosen one meets the target
  ConfigFigures chosen;      // when found
  double figure = 0;         // the chosen one's objective figure (tokens/s)
  // Every configuration that fits and drops nothing, best first; `alternatives` the best of
  // each kind (device, host, mirror per unit), so alternatives[0] is the chosen one and
  // alternatives[1] the runner-up.
  std::vector<ConfigFigures> ranked, alternatives;
  double runner_up_ratio = 0;  // chosen figure / runner-up figure (0: no runner-up)
  bool has_ideal = false;
  ConfigFigures ideal;  // the device placement with unlimited memory
  bool ideal_fits = false;
  double vs_ideal = 0;  // chosen figure / ideal figure
  // The within sizes are measured against the recommendation's figure: it is achievable
  // under B, where the ideal may not be, and a mirror pool pays its residency step even with
  // every page resident, so "within 5 % of the ideal" is often no size at all.
  double within_reference = 0;
  std::vector<MirrorSizes> mirror;
  // Nothing fits: the smallest B that fits the cheapest configuration dropping nothing (within
  // the host RAM), and the least host RAM a configuration within B needs.
  std::int64_t smallest_budget_bytes = 0;
  ConfigFigures cheapest;
  std::int64_t host_ram_needed_bytes = 0;
  std::vector<std::string> reasons;  // stable codes, docs/planner.md lists them
  std::string sentence;
};

struct RecommendInput {
  ObjectiveSpec objective;
  double within = 0.05, chosen = 0.10;   // fractions
  DeviceBudget budget;                   // B and the card
  std::int64_t host_capacity_bytes = 0;  // 0: not checked
  const PointSummary* ideal = nullptr;   // the device placement, simulated fit or not
  const PointSummary* device = nullptr;  // candidates: each when asked for
  const PointSummary* host = nullptr;
  std::span<const UnitSweep> units;  // the mirror sweeps (sizes and points)
};

Recommendation recommend(const RecommendInput& in);

// Every figure of the decision, for `plan --json` ("decision").
boost::json::object to_json(const Recommendation& r);

}  // namespace kvtier::sim
