#include "cli/run_model_report.hpp"

#include <boost/json.hpp>
#include <cstdio>
#include <iostream>

#include "cli/table.hpp"
#include "model/kv_dtype.hpp"
#include "model/mirror_policy.hpp"
#include "model/placement.hpp"

namespace kvtier::cli {

namespace {

// What --micro-batches auto estimated, for the table and the JSON.
std::string auto_micro_batches_text(const std::optional<MicroBatchChoice>& c) {
  if (!c) return "";
  std::string s = "auto (h200-pcie5 estimate of a step:";
  for (const MicroBatchEstimate& e : c->estimates)
    s += " " + fmt_int(e.micro_batches) + ": " + fmt_fixed(e.step_ms, 2) + " ms,";
  s.back() = ')';
  return s;
}

boost::json::value micro_batches_json(const std::optional<MicroBatchChoice>& c) {
  if (!c) return nullptr;
  boost::json::array est;
  for (const MicroBatchEstimate& e : c->estimates)
    est.push_back({{"micro_batches", e.micro_batches},
                   {"step_ms", e.step_ms},
                   {"link_ms", e.link_ms},
                   {"compute_ms", e.compute_ms}});
  return {{"profile", "h200-pcie5"},
          {"chosen", c->micro_batches},
          {"min_gain", kMicroBatchMinGain},
          {"estimates", std::move(est)}};
}

// Seconds the host banks took per 10 GiB (0 without a host bank).
double bank_s_per_10_gib(const runner::SessionResult& res) {
  constexpr double kTenGiB = 10.0 * 1024 * 1024 * 1024;
  return res.kv_host_bytes > 0 ? res.host_bank_s * kTenGiB / static_cast<double>(res.kv_host_bytes)
                               : 0.0;
}

double rate(std::int64_t tokens, double ms) {
  return ms > 0 ? 1000.0 * static_cast<double>(tokens) / ms : 0.0;
}

// What the table and the JSON derive from the session's counters.
struct Figures {
  double hit_rate = 1.0;  // hits / (hits + misses); 1 without lookups
  std::int64_t decode_forwards = 0;
  double ms_per_step = 0;          // decode wall time per forward
  double gpu_ms_per_step = 0;      // decode GPU time per forward
  double steady_ms_per_step = 0;   // RunnerStats::decode_steady_ms per steady forward (0: none)
  double steady_h2d_per_step = 0;  // their link bytes per steady forward
  std::int64_t h2d = 0;            // host -> device: miss copies, staged and in-place reads
};

Figures derive(const runner::SessionResult& res) {
  const runner::RunnerStats& s = res.stats;
  Figures f;
  const std::int64_t lookups = s.hits + s.misses;
  if (lookups > 0) f.hit_rate = static_cast<double>(s.hits) / static_cast<double>(lookups);
  f.decode_forwards = s.decode_tokens / res.requests;
  if (f.decode_forwards > 0) {
    f.ms_per_step = s.decode_ms / static_cast<double>(f.decode_forwards);
    f.gpu_ms_per_step = s.decode_gpu_ms / static_cast<double>(f.decode_forwards);
  }
  if (s.decode_steady_forwards > 0) {
    f.steady_ms_per_step = s.decode_steady_ms / static_cast<double>(s.decode_steady_forwards);
    f.steady_h2d_per_step = static_cast<double>(s.decode_steady_h2d_bytes) /
                            static_cast<double>(s.decode_steady_forwards);
  }
  f.h2d = s.h2d_bytes();
  return f;
}

// The first 12 tokens of a request, then " ..." when there are more.
std::string token_list(const std::vector<std::int32_t>& tokens) {
  std::string list;
  for (std::size_t i = 0; i < tokens.size() && i < 12; ++i)
    list += (i ? " " : "") + std::to_string(tokens[i]);
  if (tokens.size() > 12) list += " ...";
  return list;
}

// The GPU time of each phase over all layers, per forward of its kind (decode or prefill).
void print_phases(const runner::RunnerStats& s, std::int64_t decode_forwards) {
  Table ph({"phase (GPU, all layers)", "ms", "ms per forward"});
  const std::int64_t prefill_forwards = s.forwards - decode_forwards;
  for (const auto& [name, ms] : s.phases) {
    const bool dec = name.rfind("decode/", 0) == 0;
    const std::int64_t n = dec ? decode_forwards : prefill_forwards;
    ph.add({name, fmt_fixed(ms, 3),
            n > 0 ? fmt_fixed(ms / static_cast<double>(n), 4) : std::string("-")});
  }
  std::printf("\n");
  ph.print();
}

}  // namespace

void print_run_json(const runner::SessionOptions& o, const std::string& weights_path,
                    const runner::SessionResult& res,
                    const std::optional<MicroBatchChoice>& micro) {
  const runner::RunnerConfig& rc = o.runner;
  const runner::RunnerStats& s = res.stats;
  const Figures f = derive(res);
  // a steady figure, or null without steady forwards
  const auto steady = [&s](double v) {
    return s.decode_steady_forwards > 0 ? boost::json::value(v) : boost::json::value(nullptr);
  };
  boost::json::array toks;
  for (const auto& t : res.tokens)
    toks.push_back(boost::json::value_from(t));
  boost::json::object j{
      {"weights", weights_path},
      {"placement", std::string(to_string(rc.placement))},
      {"mirror_reads", res.mirror_reads},
      {"kv_dtype", std::string(to_string(rc.dtype))},
      {"yarn", rc.yarn},
      {"requests", res.requests},
      {"fill_depth", o.fill_depth},
      {"prefill_tokens", s.prefill_tokens},
      {"decode_tokens", s.decode_tokens},
      {"prefill_ms", s.prefill_ms},
      {"decode_ms", s.decode_ms},
      {"prefill_tokens_per_s", rate(s.prefill_tokens, s.prefill_ms)},
      {"decode_tokens_per_s", rate(s.decode_tokens, s.decode_ms)},
      {"decode_ms_per_step", f.ms_per_step},
      {"decode_gpu_ms", s.decode_gpu_ms},
      {"decode_gpu_ms_per_step", f.gpu_ms_per_step},
      {"decode_steady_ms_per_step", steady(f.steady_ms_per_step)},
      {"decode_steady_forwards", s.decode_steady_forwards},
      {"decode_steady_h2d_bytes_per_step", steady(f.steady_h2d_per_step)},
      {"micro_batches", o.micro_batches},
      {"micro_batches_auto", micro_batches_json(micro)},
      {"allow_drops", o.allow_drops},
      {"decode_splits", res.decode_splits},
      {"step_blocks", res.step_blocks},
      {"decode_timing", o.micro_batches > 1 ? "wall time of the overlapped decode steps "
                                              "after the first"
                                            : "CUDA events around each decode forward"},
      {"graph_forwards", s.graph_forwards},
      {"decode_in_place_forwards", s.in_place_forwards},
      {"hits", s.hits},
      {"misses", s.misses},
      {"evictions", s.evictions},
      {"hit_rate", f.hit_rate},
      {"drops", s.drops},
      {"h2d_bytes", f.h2d},
      {"miss_copy_bytes", s.miss_copy_bytes},
      {"policy", rc.placement == Placement::mirror ? std::string(to_string(rc.policy)) : ""},
      {"prefetched", s.prefetched},
      {"prefetch_copy_bytes", s.prefetch_copy_bytes},
      {"staged_bytes", s.staged_bytes},
      {"staged_windows", s.staged_windows},
      {"in_place_bytes", s.in_place_bytes},
      {"d2h_bytes", s.write_through_bytes},
      {"kv_device_bytes", res.kv_device_bytes},
      {"other_device_bytes", res.other_device_bytes},
      {"host_bytes", res.kv_host_bytes},
      {"budget_device_bytes", res.budget_device_bytes},
      {"device_kv_budget_bytes",
       o.device_kv_bytes > 0 ? boost::json::value(o.device_kv_bytes) : boost::json::value(nullptr)},
      {"budget_host_bytes", res.budget_host_bytes},
      {"setup_s", res.setup_s},
      {"host_bank_s", res.host_bank_s},
      {"host_bank_s_per_10_gib", bank_s_per_10_gib(res)},
      {"fill_s", res.fill_s},
      {"warm_up_s", res.warm_up_s},
      {"pool_pages", boost::json::value_from(res.pool_slots)},
      {"tokens", toks}};
  if (rc.profile_phases) {
    boost::json::object ph;
    for (const auto& [name, ms] : s.phases)
      ph[name] = ms;
    j["phases_ms"] = ph;
  }
  if (o.needle_at >= 0) {
    j["needle_at"] = o.needle_at;
    j["needle_cosine"] = boost::json::value_from(res.needle_cosines);
  }
  std::cout << boost::json::serialize(j) << "\n";
}

void print_run_table(const runner::SessionOptions& o, const Geometry& g,
                     const runner::SessionResult& res,
                     const std::optional<MicroBatchChoice>& micro) {
  const runner::RunnerConfig& rc = o.runner;
  const runner::RunnerStats& s = res.stats;
  const Figures f = derive(res);
  Table t({"figure", "value"});
  std::string pools;
  for (std::size_t k = 0; k < res.pool_slots.size(); ++k)
    pools += (k ? " + " : "") + fmt_int(res.pool_slots[k]);
  t.add(
      {"placement", std::string(to_string(rc.placement)) +
                        (rc.placement == Placement::mirror
                             ? " (" + pools + " slots per layer" +
                                   (o.pool_fits_budget ? ", the most --device-kv-gib holds" : "") +
                                   "; the step before the attention on " +
                                   (res.step_blocks > 0 ? fmt_int(res.step_blocks) + " blocks"
                                                        : std::string("a block per SM")) +
                                   ")"
                             : "")});
  t.add({"kv dtype / YaRN", std::string(to_string(rc.dtype)) + (rc.yarn ? " / on" : " / off")});
  t.add({"requests",
         fmt_int(res.requests) + (o.micro_batches > 1
                                      ? " in " + fmt_int(o.micro_batches) +
                                            " micro-batches (decode: overlapped steps, wall time)"
                                      : "")});
  if (micro)
    t.add({"micro-batches", fmt_int(o.micro_batches) + ", " + auto_micro_batches_text(micro)});
  if (o.fill_depth > 0)
    t.add(
        {"filled depth (written directly, not prefilled)", fmt_int(o.fill_depth) + " per request"});
  t.add({"prefill", fmt_int(s.prefill_tokens) + " tokens in " + fmt_fixed(s.prefill_ms, 1) +
                        " ms: " + fmt_fixed(rate(s.prefill_tokens, s.prefill_ms), 0) +
                        " tokens/s"});
  t.add({"decode", fmt_int(s.decode_tokens) + " tokens in " + fmt_fixed(s.decode_ms, 1) +
                       " ms: " + fmt_fixed(rate(s.decode_tokens, s.decode_ms), 1) + " tokens/s, " +
                       fmt_fixed(f.ms_per_step, 3) + " ms per step (GPU " +
                       fmt_fixed(f.gpu_ms_per_step, 3) + " ms; " + fmt_int(s.graph_forwards) +
                       " steps from CUDA graphs)" +
                       (f.steady_ms_per_step > 0
                            ? "; " + fmt_fixed(f.steady_ms_per_step, 3) + " ms per step over the " +
                                  fmt_int(s.decode_steady_forwards) +
                                  " after each shape's first forward and graph capture"
                            : std::string())});
  if (rc.placement == Placement::mirror) {
    t.add({"hits / misses / evictions",
           fmt_int(s.hits) + " / " + fmt_int(s.misses) + " / " + fmt_int(s.evictions)});
    t.add({"hit rate", fmt_fixed(100.0 * f.hit_rate, 2) + " %"});
    if (o.allow_drops)
      t.add({"DROPPED SELECTED PAGES (--allow-drops)",
             fmt_int(s.drops) + (s.drops > 0 ? ": the attention ran on truncated selections; "
                                               "these tokens are not the model's"
                                             : ": none dropped in this run")});
    else
      t.add({"drops (pages past the width)", fmt_int(s.drops)});
    t.add({"decode reads", res.mirror_reads});
  }
  t.add({"host -> device", fmt_bytes(static_cast<double>(f.h2d)) + " (misses " +
                               fmt_bytes(static_cast<double>(s.miss_copy_bytes)) +
                               (s.prefetched > 0 ? ", prefetched " + fmt_bytes(static_cast<double>(
                                                                         s.prefetch_copy_bytes))
                                                 : std::string()) +
                               ", staged " + fmt_bytes(static_cast<double>(s.staged_bytes)) +
                               " in " + fmt_int(s.staged_windows) + " windows, in place " +
                               fmt_bytes(static_cast<double>(s.in_place_bytes)) + ")"});
  t.add({"device -> host (write-through)", fmt_bytes(static_cast<double>(s.write_through_bytes))});
  t.add(
      {"device memory: pages / other", fmt_bytes(static_cast<double>(res.kv_device_bytes)) + " / " +
                                           fmt_bytes(static_cast<double>(res.other_device_bytes))});
  t.add(
      {"KV tier, priced (memory_budget)",
       fmt_bytes(static_cast<double>(res.budget_device_bytes)) +
           (o.device_kv_bytes > 0 ? " of the " + fmt_bytes(static_cast<double>(o.device_kv_bytes)) +
                                        " --device-kv-gib budget"
                                  : " (no --device-kv-gib budget)")});
  t.add({"host memory (pinned bank)", fmt_bytes(static_cast<double>(res.kv_host_bytes))});
  t.add({"set-up (weights, banks)", fmt_fixed(res.setup_s, 2) + " s"});
  if (res.kv_host_bytes > 0)
    t.add({"host bank ready (map, touch, pin)", fmt_fixed(res.host_bank_s, 2) +
                                                    " s: " + fmt_fixed(bank_s_per_10_gib(res), 2) +
                                                    " s per 10 GiB"});
  if (o.warm_up) t.add({"warm-up (cuBLAS's first calls)", fmt_fixed(res.warm_up_s, 2) + " s"});
  if (o.fill_depth > 0) t.add({"fill (--fill-depth)", fmt_fixed(res.fill_s, 2) + " s"});
  for (std::size_t q = 0; q < res.tokens.size(); ++q)
    t.add({"tokens, request " + std::to_string(q), token_list(res.tokens[q])});
  for (std::size_t l = 0; l < res.needle_cosines.size(); ++l)
    t.add({"needle cosine, QSA layer " + std::to_string(g.qsa_layer_ids[l]),
           fmt_fixed(res.needle_cosines[l], 4)});
  t.print();
  if (rc.profile_phases) print_phases(s, f.decode_forwards);
}

}  // namespace kvtier::cli
