// `kvtier demo`: replays a small built-in selection sequence through the residency core and
// shows every decision it makes, so the rules can be seen at work.
#include <boost/json.hpp>
#include <cstdio>
#include <iostream>
#include <vector>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/table.hpp"
#include "model/config_error.hpp"
#include "model/ensure.hpp"
#include "model/victims_heap.hpp"

namespace kvtier::cli {
namespace {

// Two decode rows (requests A: pages 0-5, B: pages 10-15) over eight steps; each step lists
// its write pages first, then each row's selected pages. Locality shifts mid-way so that
// evictions happen with a 6-slot pool.
const std::vector<std::vector<PageId>> kSteps = {
    {5, 15, 0, 1, 5, 10, 15},      {5, 15, 0, 2, 5, 10, 11, 15}, {5, 15, 0, 1, 2, 5, 10, 15},
    {5, 15, 0, 3, 4, 5, 10, 15},   {5, 15, 0, 5, 12, 13, 15},    {5, 15, 0, 1, 5, 10, 12, 15},
    {5, 15, 0, 5, 10, 11, 14, 15}, {5, 15, 0, 5, 10, 15},
};
constexpr PageId kPages = 16;

int run_demo(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")(
      "slots", po::value<int>()->default_value(6),
      "GPU pool slots (the busiest step queries 6 distinct pages)")(
      "json", "print the decisions as JSON instead of a table");
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "kvtier demo [--slots N] [--json]")) return 0;
  const int slots = vm["slots"].as<int>();
  if (slots < 1 || slots > kPages)
    throw ConfigError("--slots: 1.." + std::to_string(kPages) + " (the demo's " +
                      std::to_string(kPages) + " pages all fit in " + std::to_string(kPages) +
                      "), got " + std::to_string(slots));

  ResidencyState state(kPages, slots);
  HeapVictims victims(slots);
  boost::json::array steps_json;
  Table table({"step", "query", "hits", "misses", "copies (page->slot, evicted)"});
  long long total_hits = 0, total_misses = 0;
  for (std::size_t step = 0; step < kSteps.size(); ++step) {
    const auto& q = kSteps[step];
    std::vector<PageId> miss(q.size()), bypass(q.size());
    std::vector<SlotId> vic(q.size());
    std::vector<CopyOp> copies(q.size());
    const EnsureResult r = ensure_pages(
        state.view(), q.data(), static_cast<int>(q.size()), static_cast<std::int64_t>(step),
        victims, EnsureScratch{miss.data(), vic.data(), bypass.data()}, copies.data());
    if (r.status == EnsureStatus::pool_too_small) {
      throw ConfigError("step " + std::to_string(step) + " needs " + std::to_string(r.misses) +
                        " new pages but only " + std::to_string(r.evictable) +
                        " slots are evictable: use a larger --slots");
    }
    total_hits += r.hits;
    total_misses += r.misses;
    std::string qs, cs;
    boost::json::array cj;
    for (PageId p : q)
      qs += (qs.empty() ? "" : " ") + std::to_string(p);
    for (int i = 0; i < r.misses; ++i) {
      const CopyOp& c = copies[i];
      cs += (cs.empty() ? "" : " ") + std::to_string(c.page) + "->" + std::to_string(c.slot);
      if (c.evicted != kNoPage) cs += "(" + std::to_string(c.evicted) + ")";
      cj.push_back({{"page", c.page}, {"slot", c.slot}, {"evicted", c.evicted}});
    }
    table.add({fmt_int(static_cast<long long>(step)), qs, fmt_int(r.hits), fmt_int(r.misses), cs});
    steps_json.push_back({{"step", step}, {"hits", r.hits}, {"misses", r.misses}, {"copies", cj}});
  }
  if (vm.count("json")) {
    boost::json::object o{{"slots", slots},
                          {"pages", kPages},
                          {"hits", total_hits},
                          {"misses", total_misses},
                          {"steps", steps_json}};
    std::cout << boost::json::serialize(o) << "\n";
  } else {
    std::printf("LRU residency demo: %d pages, %d slots, %zu steps\n\n", kPages, slots,
                kSteps.size());
    table.print();
    std::printf("\ntotal: %lld hits, %lld misses\n", total_hits, total_misses);
  }
  return 0;
}

const CommandRegistrar reg{
    {"demo", "replay a small built-in selection sequence through the core", run_demo}};

}  // namespace
}  // namespace kvtier::cli
