// `kvtier run --weights W ...`: the QSA model on the GPU (cuda/runner/qsa_runner.hpp) from a
// weights file. Prefill in chunks, greedy decode, figures as a table or JSON: prefill and
// decode tokens/s, hits, misses and drops, bytes moved each way, memory held on the device
// and in host RAM. The memory budget (model/memory_budget.hpp) is checked before anything is
// allocated. --record writes the indexer's selections as a trace; --fill-depth decodes at a
// depth written directly instead of prefilled; --needle-at runs the needle proof.
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/run_modes.hpp"
#include "cli/table.hpp"
#include "cuda/weights/qsa_tensors.hpp"
#include "cuda/weights/safetensors.hpp"
#include "model/config_error.hpp"
#include "model/kv_dtype.hpp"
#include "model/memory_budget.hpp"
#include "model/placement.hpp"
#if defined(KVTIER_WITH_CUDA) && defined(KVTIER_WITH_RUNNER)
#include <cuda_runtime.h>

#include <random>

#include "cuda/host_bank.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/runner/qsa_runner.hpp"
#include "cuda/weights/needle.hpp"
#include "traces/trace_io.hpp"
#endif

namespace kvtier::cli {

namespace {

std::vector<std::int64_t> parse_lengths(const std::string& text) {
  std::vector<std::int64_t> out = parse_positive_list(text, "--prompt-tokens", "lengths");
  if (out.empty()) throw ConfigError("--prompt-tokens: no length given");
  return out;
}

// One request per non-empty line of whitespace-separated token ids.
std::vector<std::vector<std::int32_t>> read_prompts(const std::string& path, std::int64_t vocab) {
  std::istringstream in(read_text_file(path));
  std::vector<std::vector<std::int32_t>> out;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::istringstream ls(line);
    std::vector<std::int32_t> p;
    std::string tok;
    while (ls >> tok) {
      long long v = -1;
      try {
        std::size_t used = 0;
        v = std::stoll(tok, &used);
        if (used != tok.size()) v = -1;
      } catch (const std::exception&) {
        v = -1;
      }
      if (v < 0 || v >= vocab)
        throw ConfigError(path + ":" + std::to_string(line_no) + ": '" + tok +
                          "' is not a token id of the vocabulary (0.." + std::to_string(vocab - 1) +
                          ")");
      p.push_back(static_cast<std::int32_t>(v));
    }
    if (!p.empty()) out.push_back(std::move(p));
  }
  if (out.empty()) throw ConfigError(path + ": no prompt (one request per line of token ids)");
  return out;
}

#if defined(KVTIER_WITH_CUDA) && defined(KVTIER_WITH_RUNNER)
// Decodes `steps` more tokens per request with every micro-batch's forward in flight at once:
// launch each, then wait for each. Micro-batch k holds requests [first[k], first[k + 1]);
// out[q] holds request q's tokens so far and grows by one per step. Returns the wall time in
// milliseconds.
double decode_overlapped(const std::vector<std::unique_ptr<runner::QsaRunner>>& runners,
                         const std::vector<int>& first, int steps,
                         std::vector<std::vector<std::int32_t>>& out) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int d = 0; d < steps; ++d) {
    for (std::size_t k = 0; k < runners.size(); ++k) {
      std::vector<runner::RequestRows> rows;
      for (int q = first[k]; q < first[k + 1]; ++q)
        rows.push_back({q - first[k], {out[static_cast<std::size_t>(q)].back()}});
      runners[k]->launch_step(rows);
    }
    for (std::size_t k = 0; k < runners.size(); ++k) {
      const std::vector<std::int32_t> next = runners[k]->finish_step();
      for (std::size_t i = 0; i < next.size(); ++i)
        out[static_cast<std::size_t>(first[k]) + i].push_back(next[i]);
    }
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
#endif

[[maybe_unused]] double rate(std::int64_t tokens, double ms) {
  return ms > 0 ? 1000.0 * static_cast<double>(tokens) / ms : 0.0;
}

}  // namespace

int run_model(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")(
      "weights", po::value<std::string>(),
      "weights file (kvtier weights gen); geometry and vocabulary from its metadata")(
      "prompt-tokens", po::value<std::string>(),
      "random prompts of these lengths, one request each (e.g. 4096 or 8000,2000,500)")(
      "prompt", po::value<std::string>(), "prompts file: one request per line of token ids")(
      "decode", po::value<int>()->default_value(16), "greedy decode steps per request")(
      "placement", po::value<std::string>()->default_value("device"), "device, mirror or host")(
      "pool-pages", po::value<long long>()->default_value(0), "mirror: GPU slots per QSA layer")(
      "host-pages", po::value<long long>()->default_value(0),
      "logical pages of the page space (0: every request's whole context)")(
      "kv-dtype", po::value<std::string>()->default_value("bf16"), "bf16 or fp8")(
      "yarn", "YaRN RoPE scaling (contexts past the geometry's rope_max_positions)")(
      "chunk", po::value<int>()->default_value(2048), "prefill rows per request per forward")(
      "window", po::value<long long>()->default_value(131072),
      "host / mirror: prefill staging window in tokens")(
      "stand-in-width", po::value<int>()->default_value(0),
      "width of a stand-in gated MLP run for every non-QSA layer (0: off; not the model)")(
      "fill-depth", po::value<long long>()->default_value(0),
      "write deterministic K/V and index keys for this many positions of every request "
      "directly (no prefill), then run the prompt and decode: decode cost at depth")(
      "needle-at", po::value<long long>(),
      "needle proof (weights gen --needle): plant the needle at this position of a prompt of "
      "--prompt-tokens, decode the query token last, report per QSA layer the cosine between "
      "its attention output and the needle's value")("record", po::value<std::string>(),
                                                     "write the indexer's selections as a trace")(
      "micro-batches", po::value<int>()->default_value(1),
      "split the requests into this many micro-batches, each with its own runner and stream, "
      "and keep their decode steps in flight together (one's reads over the link overlap the "
      "others' GPU work); the decode figures then time the overlapped steps after the first")(
      "decode-splits", po::value<int>()->default_value(0),
      "attend splits of decode forwards (0: the kernels' default; with --micro-batches and "
      "placement host, enough for half the SMs, so that the micro-batches share the GPU)")(
      "copy-first",
      "mirror, bf16: decode runs the ensure and the miss copy before the attention, which then "
      "reads every page from the pool (default: the attention reads the pages it misses from "
      "the host bank in place while the ensure and copy run beside it; same bytes, same "
      "decisions)")("no-graphs",
                    "run decode forwards eagerly (default: replay a CUDA graph per shape)")(
      "profile", "time the phases of every forward with CUDA events (runs eagerly: no graphs)")(
      "seed", po::value<std::uint64_t>()->default_value(1), "seed of random prompts")(
      "json", "print JSON instead of tables");
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "kvtier run --weights W (--prompt-tokens N[,N...] | --prompt FILE) "
                     "[--decode N] [--placement device|mirror|host] [--pool-pages P] "
                     "[--host-pages H] [--kv-dtype bf16|fp8] [--yarn] [--fill-depth D] "
                     "[--record FILE] [--micro-batches K] [--json]"))
    return 0;
  // The arguments first (cheap, before a weights file of gigabytes is opened), then the
  // file's geometry: the same checks in every build.
  const bool prompt_file = vm.count("prompt") > 0;
  if (prompt_file == (vm.count("prompt-tokens") > 0))
    throw ConfigError("run: give --prompt-tokens N[,N...] or --prompt FILE (one of them)");
  const int decode = vm["decode"].as<int>();
  if (decode < 1) throw ConfigError("--decode: at least 1 step (the token after the prompt)");
  const bool needle = vm.count("needle-at") > 0;
  const std::int64_t fill = vm["fill-depth"].as<long long>();
  if (fill < 0) throw ConfigError("--fill-depth: must be >= 0");
  if (fill > 0 && vm.count("record")) throw ConfigError("--record: a filled context has no trace");
  const std::vector<std::int64_t> lengths =
      prompt_file ? std::vector<std::int64_t>{}
                  : parse_lengths(vm["prompt-tokens"].as<std::string>());
  const Placement placement = parse_placement(vm["placement"].as<std::string>(), "--placement");
  const KvDtype dtype = parse_kv_dtype(vm["kv-dtype"].as<std::string>(), "--kv-dtype");
  const int chunk = vm["chunk"].as<int>();
  if (chunk < 1) throw ConfigError("--chunk: must be positive");
  const int micro = vm["micro-batches"].as<int>();
  if (micro < 1) throw ConfigError("--micro-batches: must be positive");
  if (micro > 1 && (needle || vm.count("record") || vm.count("profile")))
    throw ConfigError("--micro-batches: not with --needle-at, --record or --profile");
  const int decode_splits = vm["decode-splits"].as<int>();
  if (decode_splits < 0 || decode_splits > 65535)
    throw ConfigError("--decode-splits: 0 (the kernels' default) .. 65535");
  if (micro > 1 && decode < 2)
    throw ConfigError(
        "--micro-batches: needs --decode 2 or more (the steps after the first "
        "are the overlapped ones)");
  const std::int64_t pool_pages = vm["pool-pages"].as<long long>();
  if (placement != Placement::mirror && pool_pages != 0)
    throw ConfigError("--pool-pages applies to placement mirror only");
  if (placement == Placement::mirror && pool_pages < 1)
    throw ConfigError("--placement mirror needs --pool-pages N (GPU slots per QSA layer)");
  const weights::SafetensorsFile file(vm["weights"].as<std::string>());
  const Geometry g = weights::file_geometry(file);
  const std::int64_t vocab = weights::file_vocab(file);
  std::vector<std::vector<std::int32_t>> prompts;
  if (prompt_file) prompts = read_prompts(vm["prompt"].as<std::string>(), vocab);
#if defined(KVTIER_WITH_CUDA) && defined(KVTIER_WITH_RUNNER)
  runner::RunnerConfig rc;
  rc.placement = placement;
  rc.dtype = dtype;
  rc.yarn = vm.count("yarn") > 0;
  rc.pool_pages = pool_pages;
  rc.host_pages = vm["host-pages"].as<long long>();
  rc.staging_window_tokens = vm["window"].as<long long>();
  rc.stand_in_width = vm["stand-in-width"].as<int>();
  rc.graphs = vm.count("no-graphs") == 0;
  rc.copy_first = vm.count("copy-first") > 0;
  if (rc.copy_first && placement != Placement::mirror)
    throw ConfigError("--copy-first: only the mirror placement copies");
  rc.profile_phases = vm.count("profile") > 0;

  std::int64_t needle_pos = -1;
  std::optional<weights::NeedlePlan> plan;
  if (!prompt_file) {
    std::mt19937_64 rng(vm["seed"].as<std::uint64_t>());
    for (std::int64_t n : lengths) {
      std::vector<std::int32_t> p(static_cast<std::size_t>(n));
      for (auto& t : p)
        t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab));
      prompts.push_back(std::move(p));
    }
  }
  if (needle) {
    const auto meta = file.metadata().find(weights::kMetaNeedle);
    if (meta == file.metadata().end())
      throw ConfigError("--needle-at: the weights carry no needle (kvtier weights gen --needle)");
    if (prompts.size() != 1 || prompt_file || fill > 0)
      throw ConfigError("--needle-at: one request from --prompt-tokens N, no --fill-depth");
    plan = weights::needle_plan_from_json(meta->second);
    needle_pos = vm["needle-at"].as<long long>();
    prompts[0] = weights::needle_prompt(*plan, vocab, static_cast<std::int64_t>(prompts[0].size()),
                                        needle_pos, vm["seed"].as<std::uint64_t>());
  }
  std::int64_t longest = 0;
  for (const auto& p : prompts)
    longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(p.size()));

  const int n_requests = static_cast<int>(prompts.size());
  if (micro > n_requests)
    throw ConfigError("--micro-batches " + std::to_string(micro) + ": more than the " +
                      std::to_string(n_requests) + " requests");
  const int rows_per_request = static_cast<int>(std::min<std::int64_t>(chunk, longest));
  rc.max_context = fill + longest + decode - 1;  // the last decoded token is not stored
  // Micro-batch k holds requests [first[k], first[k + 1]) (one batch: all of them).
  std::vector<int> first(static_cast<std::size_t>(micro) + 1);
  for (int k = 0; k <= micro; ++k)
    first[static_cast<std::size_t>(k)] = k * n_requests / micro;

  // The start-up budget of the pages (the foundation's memory_budget): refuses what cannot
  // fit before anything is allocated, saying the minimum.
  if (cuda::device_count() == 0)
    throw ConfigError("run: no CUDA device (cudaGetDeviceCount found none)");
  const int sms = qsa::sm_count();
  // One runner per micro-batch, each checked against what is free when it is built.
  std::vector<std::unique_ptr<runner::QsaRunner>> runners;
  MemoryBudget budget{};
  std::unique_ptr<Progress> alloc;
  const auto t_setup = std::chrono::steady_clock::now();
  for (int k = 0; k < micro; ++k) {
    rc.max_requests = first[static_cast<std::size_t>(k) + 1] - first[static_cast<std::size_t>(k)];
    rc.max_rows = rows_per_request * rc.max_requests;
    rc.decode_splits = decode_splits;
    if (decode_splits == 0 && micro > 1 && placement == Placement::host) {
      // An attention over the link keeps its CTAs waiting; on half the SMs it leaves the other
      // half to the other micro-batches' work (index, top-k, projections) in the meantime.
      rc.decode_splits = std::max(1, sms / 2 / (rc.max_requests * g.kv_heads));
    }
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
      throw std::runtime_error("run: cudaMemGetInfo failed");
    BudgetRequest br;
    br.geometry = g;
    br.dtype = rc.dtype;
    br.placement = rc.placement;
    br.host_pages =
        rc.host_pages > 0 ? rc.host_pages : g.pages_for_context(rc.max_context) * rc.max_requests;
    br.pool_slots = rc.pool_pages;
    br.batch_rows = rc.max_requests;
    br.write_pages = rc.max_requests * static_cast<int>(g.pages_for_context(rows_per_request) + 1);
    br.context_tokens = rc.max_context;
    br.staging_window_tokens = rc.staging_window_tokens;
    br.device_capacity_bytes = static_cast<std::int64_t>(free_b);
    br.host_capacity_bytes = cuda::HostBank::available_host_bytes();
    const MemoryBudget part = memory_budget(br);
    budget.device_bytes += part.device_bytes;
    budget.host_bytes += part.host_bytes;
    runners.push_back(std::make_unique<runner::QsaRunner>(
        file, g, vocab, rc, [&](std::uint64_t done, std::uint64_t total) {
          if (!alloc) alloc = std::make_unique<Progress>("host bank", total, "bytes");
          alloc->update(done);
        }));
    if (alloc) alloc->finish();
    alloc.reset();
  }
  rc.max_requests = n_requests;
  runner::QsaRunner& r = *runners.front();
  const double setup_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_setup).count();
  std::unique_ptr<traces::TraceWriter> writer;
  if (vm.count("record")) {
    const std::string path = vm["record"].as<std::string>();
    writer = traces::TraceWriter::create(path, r.trace_header("kvtier run --weights"),
                                         traces::trace_format_for_path(path));
    r.set_recorder(writer.get());
  }
  if (fill > 0)
    for (auto& mr : runners)
      mr->fill(fill);
  std::unique_ptr<Progress> progress;
  auto on_forward = [&](std::int64_t done, std::int64_t total) {
    if (!progress)
      progress = std::make_unique<Progress>("prefill", static_cast<std::uint64_t>(total), "tokens");
    progress->update(static_cast<std::uint64_t>(done));
  };
  std::vector<std::vector<std::int32_t>> out;
  std::vector<double> cosines;
  double overlapped_ms = 0;
  runner::RunnerStats before;  // micro-batches: the figures before the overlapped steps
  if (needle) {
    // Everything but the query token is prefilled; the query token is a decode row.
    const std::vector<std::int32_t> query{prompts[0].back()};
    prompts[0].pop_back();
    r.set_probe(needle_pos);
    r.generate(prompts, rows_per_request, 1, on_forward);
    if (progress) progress->finish();
    std::vector<std::int32_t> toks{r.step({{0, query}})[0]};
    for (std::size_t l = 0; l < r.last_attention().size(); ++l)
      cosines.push_back(weights::needle_cosine(r.last_attention()[l], r.probe_values()[l],
                                               g.q_heads, g.kv_heads, g.head_dim));
    r.set_probe(-1);
    for (int d = 1; d < decode; ++d)
      toks.push_back(r.step({{0, {toks.back()}}})[0]);
    out.push_back(toks);
  } else if (micro == 1) {
    out = r.generate(prompts, rows_per_request, decode, on_forward);
    if (progress) progress->finish();
  } else {
    // Prefill and the first token one micro-batch at a time, then every decode step with all
    // micro-batches in flight: launch each, then wait for each.
    std::int64_t all_tokens = 0, done_before = 0;
    for (const auto& pr : prompts)
      all_tokens += static_cast<std::int64_t>(pr.size());
    for (int k = 0; k < micro; ++k) {
      const auto b = prompts.begin() + first[static_cast<std::size_t>(k)];
      const auto e = prompts.begin() + first[static_cast<std::size_t>(k) + 1];
      std::int64_t group_tokens = 0;
      const auto progress_of_all = [&](std::int64_t done, std::int64_t total) {
        group_tokens = total;
        on_forward(done_before + done, all_tokens);
      };
      for (auto& toks : runners[static_cast<std::size_t>(k)]->generate({b, e}, rows_per_request, 1,
                                                                       progress_of_all))
        out.push_back(toks);
      done_before += group_tokens;
    }
    if (progress) progress->finish();
    for (auto& mr : runners) {  // the overlapped steps' figures apart from the rest
      before += mr->stats();
      mr->reset_stats();
    }
    overlapped_ms = decode_overlapped(runners, first, decode - 1, out);
  }
  runner::RunnerStats s;
  std::int64_t kv_device = 0, kv_host = 0, other_device = 0;
  for (auto& mr : runners) {
    mr->close();
    s += mr->stats();
    kv_device += mr->kv_device_bytes();
    kv_host += mr->kv_host_bytes();
    other_device += mr->other_device_bytes();
  }
  if (writer) writer->close();
  if (micro > 1) {
    // Traffic and counters over the whole run; decode figures of the overlapped steps only,
    // by their wall time (the runners' own decode times overlap each other).
    const runner::RunnerStats overlapped = s;
    s += before;
    s.decode_tokens = overlapped.decode_tokens;
    s.decode_ms = overlapped_ms;
    s.decode_gpu_ms = overlapped_ms;
    s.graph_forwards = overlapped.graph_forwards;
  }
  const std::int64_t lookups = s.hits + s.misses;
  const double hit_rate =
      lookups > 0 ? static_cast<double>(s.hits) / static_cast<double>(lookups) : 1.0;
  const std::int64_t decode_forwards = s.decode_tokens / rc.max_requests;
  const double ms_per_step =
      decode_forwards > 0 ? s.decode_ms / static_cast<double>(decode_forwards) : 0.0;
  const double gpu_ms_per_step =
      decode_forwards > 0 ? s.decode_gpu_ms / static_cast<double>(decode_forwards) : 0.0;
  const std::int64_t h2d = s.miss_copy_bytes + s.staged_bytes + s.in_place_bytes;
  const std::string mirror_reads = r.mirror_reads();
  if (vm.count("json")) {
    boost::json::array toks;
    for (const auto& o : out)
      toks.push_back(boost::json::value_from(o));
    boost::json::object o{{"weights", file.path()},
                          {"placement", std::string(to_string(rc.placement))},
                          {"mirror_reads", mirror_reads},
                          {"kv_dtype", std::string(to_string(rc.dtype))},
                          {"yarn", rc.yarn},
                          {"requests", rc.max_requests},
                          {"fill_depth", fill},
                          {"prefill_tokens", s.prefill_tokens},
                          {"decode_tokens", s.decode_tokens},
                          {"prefill_ms", s.prefill_ms},
                          {"decode_ms", s.decode_ms},
                          {"prefill_tokens_per_s", rate(s.prefill_tokens, s.prefill_ms)},
                          {"decode_tokens_per_s", rate(s.decode_tokens, s.decode_ms)},
                          {"decode_ms_per_step", ms_per_step},
                          {"decode_gpu_ms", s.decode_gpu_ms},
                          {"decode_gpu_ms_per_step", gpu_ms_per_step},
                          {"micro_batches", micro},
                          {"decode_splits", rc.decode_splits},
                          {"decode_timing", micro > 1 ? "wall time of the overlapped decode steps "
                                                        "after the first"
                                                      : "CUDA events around each decode forward"},
                          {"graph_forwards", s.graph_forwards},
                          {"hits", s.hits},
                          {"misses", s.misses},
                          {"evictions", s.evictions},
                          {"hit_rate", hit_rate},
                          {"drops", s.drops},
                          {"h2d_bytes", h2d},
                          {"miss_copy_bytes", s.miss_copy_bytes},
                          {"staged_bytes", s.staged_bytes},
                          {"staged_windows", s.staged_windows},
                          {"in_place_bytes", s.in_place_bytes},
                          {"d2h_bytes", s.write_through_bytes},
                          {"kv_device_bytes", kv_device},
                          {"other_device_bytes", other_device},
                          {"host_bytes", kv_host},
                          {"budget_device_bytes", budget.device_bytes},
                          {"budget_host_bytes", budget.host_bytes},
                          {"setup_s", setup_s},
                          {"tokens", toks}};
    if (rc.profile_phases) {
      boost::json::object ph;
      for (const auto& [name, ms] : s.phases)
        ph[name] = ms;
      o["phases_ms"] = ph;
    }
    if (needle) {
      o["needle_at"] = needle_pos;
      o["needle_cosine"] = boost::json::value_from(cosines);
    }
    std::cout << boost::json::serialize(o) << "\n";
  } else {
    Table t({"figure", "value"});
    t.add({"placement", std::string(to_string(rc.placement)) +
                            (rc.placement == Placement::mirror
                                 ? " (" + fmt_int(rc.pool_pages) + " slots per layer)"
                                 : "")});
    t.add({"kv dtype / YaRN", std::string(to_string(rc.dtype)) + (rc.yarn ? " / on" : " / off")});
    t.add({"requests", fmt_int(rc.max_requests) +
                           (micro > 1 ? " in " + fmt_int(micro) +
                                            " micro-batches (decode: overlapped steps, wall time)"
                                      : "")});
    if (fill > 0)
      t.add({"filled depth (written directly, not prefilled)", fmt_int(fill) + " per request"});
    t.add({"prefill", fmt_int(s.prefill_tokens) + " tokens in " + fmt_fixed(s.prefill_ms, 1) +
                          " ms: " + fmt_fixed(rate(s.prefill_tokens, s.prefill_ms), 0) +
                          " tokens/s"});
    t.add({"decode", fmt_int(s.decode_tokens) + " tokens in " + fmt_fixed(s.decode_ms, 1) +
                         " ms: " + fmt_fixed(rate(s.decode_tokens, s.decode_ms), 1) +
                         " tokens/s, " + fmt_fixed(ms_per_step, 3) + " ms per step (GPU " +
                         fmt_fixed(gpu_ms_per_step, 3) + " ms; " + fmt_int(s.graph_forwards) +
                         " steps from CUDA graphs)"});
    if (rc.placement == Placement::mirror) {
      t.add({"hits / misses / evictions",
             fmt_int(s.hits) + " / " + fmt_int(s.misses) + " / " + fmt_int(s.evictions)});
      t.add({"hit rate", fmt_fixed(100.0 * hit_rate, 2) + " %"});
      t.add({"drops (pages past the width)", fmt_int(s.drops)});
      t.add({"decode reads", mirror_reads});
    }
    t.add({"host -> device", fmt_bytes(static_cast<double>(h2d)) + " (misses " +
                                 fmt_bytes(static_cast<double>(s.miss_copy_bytes)) + ", staged " +
                                 fmt_bytes(static_cast<double>(s.staged_bytes)) + " in " +
                                 fmt_int(s.staged_windows) + " windows, in place " +
                                 fmt_bytes(static_cast<double>(s.in_place_bytes)) + ")"});
    t.add(
        {"device -> host (write-through)", fmt_bytes(static_cast<double>(s.write_through_bytes))});
    t.add({"device memory: pages / other", fmt_bytes(static_cast<double>(kv_device)) + " / " +
                                               fmt_bytes(static_cast<double>(other_device))});
    t.add({"host memory (pinned bank)", fmt_bytes(static_cast<double>(kv_host))});
    t.add({"set-up (weights, banks)", fmt_fixed(setup_s, 2) + " s"});
    for (std::size_t q = 0; q < out.size(); ++q) {
      std::string list;
      for (std::size_t i = 0; i < out[q].size() && i < 12; ++i)
        list += (i ? " " : "") + std::to_string(out[q][i]);
      if (out[q].size() > 12) list += " ...";
      t.add({"tokens, request " + std::to_string(q), list});
    }
    if (needle) {
      for (std::size_t l = 0; l < cosines.size(); ++l)
        t.add({"needle cosine, QSA layer " + std::to_string(g.qsa_layer_ids[l]),
               fmt_fixed(cosines[l], 4)});
    }
    t.print();
    if (rc.profile_phases) {
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
  }
  return 0;
#else
  (void)decode, (void)needle, (void)lengths, (void)dtype, (void)g, (void)prompts;
  throw ConfigError("run --weights: this kvtier was built without the CUDA model runner");
#endif
}

}  // namespace kvtier::cli
