// `kvtier run --weights W ...`: the QSA model on the GPU from a weights file. This file parses
// and prints: the arguments are checked (on their own, then against the file's geometry and
// vocabulary), mapped to runner::SessionOptions and run by runner::run_session
// (cuda/runner/session.hpp: micro-batches, the needle protocol, the per-batch memory budgets,
// prefill and the decode loop). Its figures print as a table or JSON: prefill and decode
// tokens/s, hits, misses and drops, bytes moved each way, memory held on the device and in
// host RAM (cli/run_model_report). --record writes the indexer's selections as a trace;
// --fill-depth decodes at a depth written directly instead of prefilled; --needle-at runs the
// needle proof.
#include <algorithm>
#include <optional>
#include <random>
#include <sstream>

#include "cli/options.hpp"
#include "cli/run_model_report.hpp"
#include "cli/run_modes.hpp"
#include "cuda/runner/session.hpp"
#include "cuda/runner/session_plan.hpp"
#include "cuda/weights/needle.hpp"
#include "cuda/weights/qsa_tensors.hpp"
#include "cuda/weights/safetensors.hpp"
#include "model/config_error.hpp"
#include "model/cost_model.hpp"
#include "model/kv_dtype.hpp"
#include "model/micro_batch_choice.hpp"
#include "model/mirror_policy.hpp"
#include "model/placement.hpp"
#include "sim/profiles.hpp"

namespace kvtier::cli {

namespace {

constexpr const char* kUsage =
    "kvtier run --weights W (--prompt-tokens N[,N...] | --prompt FILE) "
    "[--decode N] [--placement device|mirror|host] [--pool-pages P] "
    "[--host-pages H] [--kv-dtype bf16|fp8] [--yarn] [--fill-depth D] "
    "[--record FILE] [--micro-batches K] [--allow-drops] [--device-kv-gib B] [--json]";

po::options_description model_options() {
  po::options_description desc("options");
  const std::string step_blocks_help =
      "mirror: blocks of the residency step that runs before the attention (the ensure and the "
      "miss copy: fp8, --copy-first, --policy prefetch, and bf16 decode forwards after one that "
      "missed many pages); -1: " +
      std::to_string(runner::kMicroBatchStepBlocks) +
      " with --micro-batches 2 or more, so that one micro-batch's miss copy leaves the others' "
      "work the other SMs, else one per SM; 0: one per SM";
  desc.add_options()("help,h", "show this help")(
      "weights", po::value<std::string>(),
      "weights file (kvtier weights gen); geometry and vocabulary from its metadata")(
      "prompt-tokens", po::value<std::string>(),
      "random prompts of these lengths, one request each (e.g. 4096 or 8000,2000,500)")(
      "prompt", po::value<std::string>(), "prompts file: one request per line of token ids")(
      "decode", po::value<int>()->default_value(16), "greedy decode steps per request")(
      "placement", po::value<std::string>()->default_value("device"), "device, mirror or host")(
      "pool-pages", po::value<std::string>(),
      "mirror: GPU slots per QSA layer, or 'max': the most slots that fit --device-kv-gib "
      "(shared among micro-batches by their requests)")(
      "allow-drops",
      "mirror: run with a pool below the smallest that drops no selected page (refused "
      "otherwise): the attention then runs on truncated selections, an experiment")(
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
                                                     "write the indexer's selections as a trace "
                                                     "(with --fill-depth the requests begin at "
                                                     "that depth: the trace has no fill forward)")(
      "micro-batches", po::value<std::string>()->default_value("auto"),
      "split the requests into this many micro-batches, each with its own runner and stream, "
      "and keep their decode steps in flight together (one's reads over the link overlap the "
      "others' GPU work); the decode figures then time the overlapped steps after the first. "
      "auto: placements host and mirror take 2 or 4 where the h200-pcie5 profile's estimate of "
      "a decode step is at least 3 % shorter than in one batch (model/micro_batch_choice.hpp; "
      "mirror, with --pool-pages max only: its misses estimated from each group's share of B), "
      "else 1; placement device, "
      "--needle-at, --record, --profile-phases and --decode 1 take 1")(
      "decode-splits", po::value<int>()->default_value(0),
      "attend splits of decode forwards (0: the kernels' default; with --micro-batches and "
      "placement host, enough for half the SMs, so that the micro-batches share the GPU)")(
      "step-blocks", po::value<int>()->default_value(-1), step_blocks_help.c_str())(
      "copy-first",
      "mirror, bf16: decode runs the ensure and the miss copy before the attention, which then "
      "reads every page from the pool (default: the attention reads the pages it misses from "
      "the host bank in place while the ensure and copy run beside it; same bytes, same "
      "decisions)")("no-graphs",
                    "run decode forwards eagerly (default: replay a CUDA graph per shape)")(
      "policy", po::value<std::string>()->default_value("lru"),
      "mirror: lru (every miss copied into the pool), or prefetch (also each QSA layer's pages "
      "ensured into the next layer's pool on a stream beside, while the GPU computes up to that "
      "layer's step; the step then runs before the attention, as with --copy-first)")(
      "no-warm-up",
      "time the prefill cold: skip calling every cuBLAS projection shape of its forwards once "
      "before it (default: warmed, reported as warm_up_s; cold, the first forwards pay the "
      "library's first-call set-up, ~0.1 s once per process)")(
      "profile-phases",
      "time the phases of every forward with CUDA events (runs eagerly: no graphs)")(
      "seed", po::value<std::uint64_t>()->default_value(1), "seed of random prompts")(
      "json", "print JSON instead of tables");
  add_device_kv_option(desc, "what is free on the GPU");
  return desc;
}

std::vector<std::int64_t> parse_lengths(const std::string& text) {
  std::vector<std::int64_t> out = parse_positive_list(text, "--prompt-tokens", "lengths");
  if (out.empty()) throw ConfigError("--prompt-tokens: no length given");
  if (out.size() > static_cast<std::size_t>(runner::kMaxSessionRequests))
    throw ConfigError("--prompt-tokens: " + std::to_string(out.size()) +
                      " requests; a run takes at most " +
                      std::to_string(runner::kMaxSessionRequests));

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

// The arguments of `kvtier run --weights`, checked on their own.
struct ModelArgs {
  std::string weights;
  std::optional<std::string> prompt_file;  // or random prompts of `lengths`
  std::vector<std::int64_t> lengths;       // --prompt-tokens
  std::uint64_t seed = 1;
  std::optional<std::int64_t> needle_at;
  bool json = false;
  bool micro_batches_auto = false;  // --micro-batches auto: chosen once the prompts are known
  runner::SessionOptions session;   // everything but the prompts and the needle's position
};

// The checks that need only the arguments, in every build: cheap, before a weights file of
// gigabytes is opened.
ModelArgs check_args(const po::variables_map& vm) {
  ModelArgs a;
  runner::SessionOptions& o = a.session;
  runner::RunnerConfig& rc = o.runner;
  const bool prompt_file = vm.count("prompt") > 0;
  if (prompt_file == (vm.count("prompt-tokens") > 0))
    throw ConfigError("run: give --prompt-tokens N[,N...] or --prompt FILE (one of them)");
  o.decode = vm["decode"].as<int>();
  if (o.decode < 1) throw ConfigError("--decode: at least 1 step (the token after the prompt)");
  const bool needle = vm.count("needle-at") > 0;
  o.warm_up = vm.count("no-warm-up") == 0;
  o.fill_depth = vm["fill-depth"].as<long long>();
  if (o.fill_depth < 0 || o.fill_depth > kMaxContextTokens)
    throw ConfigError("--fill-depth: 0.." + std::to_string(kMaxContextTokens) + " positions, got " +
                      std::to_string(o.fill_depth));
  if (!prompt_file) a.lengths = parse_lengths(vm["prompt-tokens"].as<std::string>());
  rc.placement = parse_placement(vm["placement"].as<std::string>(), "--placement");
  rc.dtype = parse_kv_dtype(vm["kv-dtype"].as<std::string>(), "--kv-dtype");
  o.chunk = vm["chunk"].as<int>();
  if (o.chunk < 1) throw ConfigError("--chunk: must be positive");
  const std::optional<int> micro = parse_count_or_auto(
      vm["micro-batches"].as<std::string>(), "--micro-batches", runner::kMaxSessionRequests);
  a.micro_batches_auto = !micro;
  if (micro) o.micro_batches = *micro;
  if (o.micro_batches > 1 && (needle || vm.count("record") || vm.count("profile-phases")))
    throw ConfigError("--micro-batches: not with --needle-at, --record or --profile-phases");
  rc.decode_splits = vm["decode-splits"].as<int>();
  if (rc.decode_splits < 0 || rc.decode_splits > 65535)
    throw ConfigError("--decode-splits: 0 (the kernels' default) .. 65535");
  o.step_blocks = vm["step-blocks"].as<int>();
  if (o.step_blocks < -1 || o.step_blocks > 65535)
    throw ConfigError("--step-blocks: -1 (kvtier's choice), 0 (one per SM) or 1 .. 65535, got " +
                      std::to_string(o.step_blocks));
  if (o.micro_batches > 1 && o.decode < 2)
    throw ConfigError(
        "--micro-batches: needs --decode 2 or more (the steps after the first "
        "are the overlapped ones)");
  const std::string pool = vm.count("pool-pages") ? vm["pool-pages"].as<std::string>() : "";
  o.pool_fits_budget = pool == "max";
  if (!pool.empty() && !o.pool_fits_budget) {
    const auto n = parse_positive_list(pool, "--pool-pages", "slots (or max)");
    if (n.size() != 1)
      throw ConfigError("--pool-pages: one slot count (or max), got '" + pool + "'");
    rc.pool_pages = n[0];
  }
  if (rc.placement != Placement::mirror && (rc.pool_pages != 0 || o.pool_fits_budget))
    throw ConfigError("--pool-pages applies to placement mirror only");
  if (rc.placement == Placement::mirror && rc.pool_pages < 1 && !o.pool_fits_budget)
    throw ConfigError(
        "--placement mirror needs --pool-pages N (GPU slots per QSA layer) or --pool-pages max "
        "with --device-kv-gib B");
  if (o.pool_fits_budget && !vm.count("device-kv-gib"))
    throw ConfigError("--pool-pages max: the most slots within a budget needs --device-kv-gib B");
  if (rc.pool_pages > kMaxPages)
    throw ConfigError("--pool-pages: at most " + std::to_string(kMaxPages) +
                      " (slot ids are 32-bit), got " + std::to_string(rc.pool_pages));
  if (vm.count("device-kv-gib"))  // the card's size is known only once CUDA is up
    o.device_kv_bytes = device_kv_budget(vm, 0, "the GPU").kv_bytes;
  o.allow_drops = vm.count("allow-drops") > 0;
  if (o.allow_drops && rc.placement != Placement::mirror)
    throw ConfigError("--allow-drops applies to placement mirror only");
  rc.yarn = vm.count("yarn") > 0;
  rc.host_pages = vm["host-pages"].as<long long>();
  if (rc.host_pages < 0 || rc.host_pages > kMaxPages)
    throw ConfigError("--host-pages: 0 (every request's whole context) .. " +
                      std::to_string(kMaxPages) + " (page ids are 32-bit), got " +
                      std::to_string(rc.host_pages));
  rc.staging_window_tokens = vm["window"].as<long long>();
  if (rc.staging_window_tokens < 1 || rc.staging_window_tokens > kMaxContextTokens)
    throw ConfigError("--window: 1.." + std::to_string(kMaxContextTokens) + " tokens, got " +
                      std::to_string(rc.staging_window_tokens));
  rc.stand_in_width = vm["stand-in-width"].as<int>();
  if (rc.stand_in_width < 0)
    throw ConfigError("--stand-in-width: 0 (off) or a width, got " +
                      std::to_string(rc.stand_in_width));
  rc.graphs = vm.count("no-graphs") == 0;
  rc.copy_first = vm.count("copy-first") > 0;
  rc.policy = parse_mirror_policy(vm["policy"].as<std::string>());
  if (rc.policy == MirrorPolicy::hybrid)
    throw ConfigError(
        "--policy hybrid: kvtier run runs lru and prefetch (kvtier sim --policy "
        "hybrid simulates it)");
  rc.profile_phases = vm.count("profile-phases") > 0;
  if (vm.count("record")) o.record_path = vm["record"].as<std::string>();
  if (needle) {
    a.needle_at = vm["needle-at"].as<long long>();
    if (*a.needle_at < 0)
      throw ConfigError("--needle-at: a position >= 0, got " + std::to_string(*a.needle_at));
  }
  a.weights = vm["weights"].as<std::string>();
  if (prompt_file) a.prompt_file = vm["prompt"].as<std::string>();
  a.seed = vm["seed"].as<std::uint64_t>();
  a.json = vm.count("json") > 0;
  return a;
}

// The session's options complete: the checks that need the weights file, the prompts (the
// file's, or random ones of the given lengths from the seed, after their context is checked
// against the geometry's) and, with --needle-at, the needle prompt in place of the one
// request's.
runner::SessionOptions session_options(const ModelArgs& a, const weights::SafetensorsFile& file,
                                       const Geometry& g, std::int64_t vocab,
                                       std::vector<std::vector<std::int32_t>> prompts) {
  runner::SessionOptions o = a.session;
  if (o.runner.copy_first && o.runner.placement != Placement::mirror)
    throw ConfigError("--copy-first: only the mirror placement copies");
  if (o.runner.policy != MirrorPolicy::lru && o.runner.placement != Placement::mirror)
    throw ConfigError("--policy applies to placement mirror only");
  if (!a.prompt_file) {
    runner::check_context(g, o.runner.yarn, o.fill_depth,
                          *std::max_element(a.lengths.begin(), a.lengths.end()), o.decode);
    runner::check_prompt_tokens(a.lengths);
    std::mt19937_64 rng(a.seed);
    for (std::int64_t n : a.lengths) {
      std::vector<std::int32_t> p(static_cast<std::size_t>(n));
      for (auto& t : p)
        t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab));
      prompts.push_back(std::move(p));
    }
  }
  if (a.needle_at) {
    const auto meta = file.metadata().find(weights::kMetaNeedle);
    if (meta == file.metadata().end())
      throw ConfigError("--needle-at: the weights carry no needle (kvtier weights gen --needle)");
    if (prompts.size() != 1 || a.prompt_file || o.fill_depth > 0)
      throw ConfigError("--needle-at: one request from --prompt-tokens N, no --fill-depth");
    const weights::NeedlePlan plan = weights::needle_plan_from_json(meta->second);
    prompts[0] = weights::needle_prompt(plan, vocab, static_cast<std::int64_t>(prompts[0].size()),
                                        *a.needle_at, a.seed);
    o.needle_at = *a.needle_at;
  }
  const int n_requests = static_cast<int>(prompts.size());
  if (o.micro_batches > n_requests)
    throw ConfigError("--micro-batches " + std::to_string(o.micro_batches) + ": more than the " +
                      std::to_string(n_requests) + " requests");
  o.prompts = std::move(prompts);
  return o;
}

}  // namespace

int run_model(const std::vector<std::string>& args) {
  const po::options_description desc = model_options();
  po::variables_map vm;
  if (!parse_options(args, desc, vm, kUsage)) return 0;
  const ModelArgs a = check_args(vm);
  const weights::SafetensorsFile file(a.weights);
  const Geometry g = weights::file_geometry(file);
  const std::int64_t vocab = weights::file_vocab(file);
  std::vector<std::vector<std::int32_t>> prompts;
  if (a.prompt_file) prompts = read_prompts(*a.prompt_file, vocab);
  runner::SessionOptions o = session_options(a, file, g, vocab, std::move(prompts));
  // The h200-pcie5 profile: the card the runner's kernels were tuned on.
  const std::optional<MicroBatchChoice> micro =
      a.micro_batches_auto
          ? runner::choose_session_micro_batches(o, g, CostModel(sim::load_profile("h200-pcie5")))
          : std::nullopt;
  // The session's checks (context, micro-batches, a mirror pool that would drop selected
  // pages) before a device is looked for: run_session plans again with the SM count, which
  // only sets decode splits.
  runner::plan_session(o, g, 1);
#if defined(KVTIER_WITH_CUDA) && defined(KVTIER_WITH_RUNNER)
  SessionBars bars;
  const runner::SessionResult res = runner::run_session(file, g, vocab, o, bars.callbacks());
  if (a.json)
    print_run_json(o, file.path(), res, micro);
  else
    print_run_table(o, g, res, micro);
  return 0;
#else
  throw ConfigError("run --weights: this kvtier was built without the CUDA model runner");
#endif
}

}  // namespace kvtier::cli
