#pragma once
// `kvtier plan --concurrency 1,8,32 --prompt N --decode N`: the plan at several numbers of
// requests in flight (sim/concurrency_sweep.hpp); parsing and printing only.
#include "cli/options.hpp"
#include "model/cost_model.hpp"
#include "sim/planner.hpp"

namespace kvtier::cli {

// --concurrency and the generated workload's options (--prompt, --decode, --prefill-chunk,
// --preset, --seed, --geometry).
void add_concurrency_options(po::options_description& desc);
// Whether --concurrency was given. Throws ConfigError for a workload option without it, and
// for --concurrency with --trace (a level is a generated workload) or --html.
bool wants_concurrency(const po::variables_map& vm);
// Plans every level with `cfg` and prints the table (or --json); a line per level on stderr.
int run_plan_concurrency(const po::variables_map& vm, const CostModel& cost,
                         const sim::PlanConfig& cfg);

}  // namespace kvtier::cli
