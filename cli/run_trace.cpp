// `kvtier run --trace FILE --placement device|mirror|host [--pool-pages N] [--read MODE]`:
// replays a selection trace on the GPU with real page data (cuda/trace_replay.hpp). By default
// (--read attend) the trace's selections drive the real QSA attention kernel; --read checksum
// reads every selected token into a checksum instead (what --verify recomputes on the CPU).
// Reports per forward GPU time, hits, misses, bytes each way, drops and the digest of the
// attention outputs (or the checksum), as a table or JSON.
#include <boost/json.hpp>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/run_modes.hpp"
#include "cli/table.hpp"
#include "model/config_error.hpp"
#include "model/kv_dtype.hpp"
#include "model/mirror_policy.hpp"
#include "model/page_space.hpp"
#include "model/placement.hpp"
#if defined(KVTIER_WITH_CUDA)
#include "cuda/host_bank.hpp"
#include "cuda/trace_replay.hpp"
#endif
#include "io/output_file.hpp"
#include "traces/trace_source.hpp"

namespace kvtier::cli {
namespace {

#if defined(KVTIER_WITH_CUDA)
std::string hex64(unsigned long long v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", v);
  return buf;
}

boost::json::object step_json(const cuda::ReplayStep& s) {
  return {{"forward", s.forward},
          {"rows", s.rows},
          {"width", s.width},
          {"tokens", s.tokens},
          {"decode_tokens", s.decode_tokens},
          {"gpu_us", s.gpu_us},
          {"hits", s.hits},
          {"misses", s.misses},
          {"evictions", s.evictions},
          {"prefetched", s.prefetched},
          {"drops", s.drops},
          {"missing", s.missing},
          {"selected_tokens", s.selected_tokens},
          {"h2d_bytes", s.h2d_bytes},
          {"d2h_bytes", s.d2h_bytes},
          {"reads_in_place", s.reads_in_place},
          {"beside_lanes", s.beside_lanes},
          {"beside_blocks", s.beside_blocks}};
}
#endif

po::options_description run_trace_options() {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("trace", po::value<std::string>(),
                                                 "selection trace (binary or JSON lines)")(
      "placement", po::value<std::string>()->default_value("mirror"), "device, mirror or host")(
      "pool-pages", po::value<long long>()->default_value(0), "mirror: GPU slots per QSA layer")(
      "kv-dtype", po::value<std::string>()->default_value("bf16"), "bf16 or fp8")(
      "read", po::value<std::string>(),
      "how the selected tokens are read: attend (default: the QSA attention kernel with a "
      "deterministic query per row; needs head_dim 256 and GQA group 12) or checksum (every "
      "selected token's bytes into a checksum; the default with --verify)")(
      "ensure-form", po::value<std::string>()->default_value("block"),
      "device ensure kernel: block, multi-block or core-thread")(
      "write-through", "device placement: also store every token to a host bank")(
      "policy", po::value<std::string>()->default_value("lru"),
      "mirror: lru (every miss copied into the pool), or prefetch (also each layer's query "
      "ensured into the next layer's pool, beside the main stream; the residency step runs "
      "before the attention, as with --copy-first); hybrid runs in kvtier sim only")(
      "copy-first",
      "mirror, attend, bf16: run the ensure and the miss copy before the attention, which then "
      "reads every page from the pool (default: the attention reads the pages it misses from "
      "the host bank in place while the ensure and copy run beside it; same bytes, same "
      "decisions)")(
      "verify",
      "check every layer-step against the core on the CPU (mirror: compacted query, copy "
      "list) and, in checksum mode, the checksum against a CPU reference; implies --read "
      "checksum unless --read attend is given (synchronises: slow)")(
      "decisions", po::value<std::string>(),
      "with --verify: every install as JSON lines (the simulator's format)")(
      "forwards", po::value<long long>()->default_value(-1), "replay at most N forwards")(
      "steps", po::value<int>()->default_value(20), "forwards listed in the table (first N)")(
      "step-phases",
      "mirror: where the residency steps that run beside the attention (the forwards that read "
      "their misses in place) spend their time: the leading block's phases, the step's span and "
      "the gap to the next step, medians over the last 65,536 steps (the steps record them in a "
      "kernel form of their own)")("json",
                                   "print JSON (totals and every forward) instead of a table");
  return desc;
}

// The options' own checks, in every build: before the trace is read or a device looked for.
void check_options(const po::variables_map& vm) {
  const Placement placement = parse_placement(vm["placement"].as<std::string>(), "--placement");
  parse_kv_dtype(vm["kv-dtype"].as<std::string>(), "--kv-dtype");
  const long long pool = vm["pool-pages"].as<long long>();
  if (pool < 0 || pool > kMaxPages)
    throw ConfigError("--pool-pages: 1.." + std::to_string(kMaxPages) +
                      " GPU slots per QSA layer (placement mirror), got " + std::to_string(pool));
  if (placement != Placement::mirror && pool != 0)
    throw ConfigError("--pool-pages applies to placement mirror only");
  const MirrorPolicy policy = parse_mirror_policy(vm["policy"].as<std::string>());
  if (policy == MirrorPolicy::hybrid)
    throw ConfigError(
        "--policy hybrid: kvtier run replays lru and prefetch (kvtier sim --policy "
        "hybrid simulates it)");
  if (policy != MirrorPolicy::lru && placement != Placement::mirror)
    throw ConfigError("--policy applies to placement mirror only");
  if (vm.count("step-phases") && placement != Placement::mirror)
    throw ConfigError("--step-phases applies to placement mirror only (its residency steps)");
  if (vm["forwards"].as<long long>() < -1)
    throw ConfigError("--forwards: -1 (all) or a count, got " +
                      std::to_string(vm["forwards"].as<long long>()));
  if (vm["steps"].as<int>() < 0)
    throw ConfigError("--steps: 0 or more forwards listed, got " +
                      std::to_string(vm["steps"].as<int>()));
}

#if defined(KVTIER_WITH_CUDA)
cuda::EnsureForm parse_ensure_form(const std::string& form) {
  if (form == "block") return cuda::EnsureForm::block;
  if (form == "multi-block") return cuda::EnsureForm::multi_block;
  if (form == "core-thread") return cuda::EnsureForm::core_thread;
  throw ConfigError("--ensure-form: expected block, multi-block or core-thread, got '" + form +
                    "'");
}

// The replay's configuration from the options; `decisions` is opened when asked for.
cuda::ReplayConfig replay_config(const po::variables_map& vm,
                                 std::optional<io::OutputFile>& decisions) {
  cuda::ReplayConfig c;
  c.placement = parse_placement(vm["placement"].as<std::string>(), "--placement");
  c.dtype = parse_kv_dtype(vm["kv-dtype"].as<std::string>(), "--kv-dtype");
  c.pool_pages = vm["pool-pages"].as<long long>();
  c.form = parse_ensure_form(vm["ensure-form"].as<std::string>());
  c.write_through = vm.count("write-through") > 0;
  c.policy = parse_mirror_policy(vm["policy"].as<std::string>());
  c.copy_first = vm.count("copy-first") > 0;
  if (c.copy_first && c.placement != kvtier::Placement::mirror)
    throw ConfigError("--copy-first: only the mirror placement copies");
  c.verify = vm.count("verify") > 0;
  c.read = vm.count("read") ? cuda::parse_read_mode(vm["read"].as<std::string>(), "--read")
           : c.verify       ? cuda::ReadMode::checksum
                            : cuda::ReadMode::attend;
  c.max_forwards = vm["forwards"].as<long long>();
  c.step_phases = vm.count("step-phases") > 0;
  if (vm.count("decisions")) {
    if (!c.verify) throw ConfigError("--decisions needs --verify");
    decisions.emplace(vm["decisions"].as<std::string>());
    c.decisions = &decisions->stream();
  }
  return c;
}

// Hits over pool lookups; none without lookups (device and host placements look up no pool).
std::optional<double> replay_hit_rate(const cuda::ReplayStep& t) {
  if (t.hits + t.misses == 0) return std::nullopt;
  return static_cast<double>(t.hits) / static_cast<double>(t.hits + t.misses);
}

double us_per_forward(const cuda::ReplayStep& t) {
  return t.forward > 0 ? t.gpu_us / static_cast<double>(t.forward) : 0.0;
}

void print_replay_json(const traces::TraceInput& input, const cuda::ReplayConfig& c,
                       const cuda::ReplayResult& r) {
  const cuda::ReplayStep& t = r.total;
  const std::optional<double> hit_rate = replay_hit_rate(t);
  boost::json::array steps;
  for (const auto& s : r.steps)
    steps.push_back(step_json(s));
  boost::json::object o{{"trace", input.name},
                        {"placement", r.placement},
                        {"kv_dtype", r.dtype},
                        {"read", r.read},
                        {"pool_pages", r.pool_pages},
                        {"num_pages", r.num_pages},
                        {"qsa_layers", r.layers},
                        {"device_bytes", r.device_bytes},
                        {"host_bytes", r.host_bytes},
                        {"checksum", hex64(r.checksum)},
                        {"gpu_us_per_forward", us_per_forward(t)},
                        {"hit_rate", hit_rate ? boost::json::value(*hit_rate) : nullptr},
                        {"total", step_json(t)},
                        {"steps", steps}};
  if (c.read == cuda::ReadMode::attend) {
    o["attend_kernel"] = r.attend_kernel;
    o["q_heads"] = r.q_heads;
    if (!r.mirror_reads.empty()) o["mirror_reads"] = r.mirror_reads;
    if (c.placement == Placement::mirror) o["policy"] = to_string(c.policy);
    o["gpu_us_measures"] =
        "the QSA layers back to back: store (mirror: table lookup or compaction) .. "
        "attention, the mirror's residency steps included; K/V and query generation "
        "excluded";
  } else {
    o["gpu_us_measures"] = "the forward, K/V byte generation included";
  }
  if (c.step_phases) {
    const cuda::StepPhases& p = r.step_phases;
    o["step_phases"] = {
        {"steps", p.launches},         {"ticket_us", p.ticket},   {"compaction_us", p.compaction},
        {"check_us", p.check},         {"mark_us", p.mark},       {"sort_us", p.sort},
        {"victims_us", p.victims},     {"install_us", p.install}, {"publish_us", p.publish},
        {"copy_exit_us", p.copy_exit}, {"span_us", p.span},       {"gap_us", p.gap}};
  }
  if (r.verified) {
    if (c.read == cuda::ReadMode::checksum) o["expected_checksum"] = hex64(r.expected_checksum);
    if (!r.first_checksum_mismatch.empty())
      o["first_checksum_mismatch"] = r.first_checksum_mismatch;
    o["query_mismatches"] = r.query_mismatches;
    o["decision_mismatches"] = r.decision_mismatches;
    o["first_mismatch"] = r.first_mismatch;
  }
  std::cout << boost::json::serialize(o) << "\n";
}

void print_replay_table(const traces::TraceInput& input, const cuda::ReplayConfig& c,
                        const cuda::ReplayResult& r, int show) {
  const cuda::ReplayStep& t = r.total;
  Table st({"forward", "rows", "tokens", "width", "gpu us", "hits", "misses", "drops", "H2D bytes",
            "D2H bytes"});
  for (std::size_t i = 0; i < r.steps.size() && static_cast<int>(i) < show; ++i) {
    const auto& s = r.steps[i];
    st.add({fmt_int(s.forward), fmt_int(s.rows), fmt_int(s.tokens), fmt_int(s.width),
            fmt_fixed(s.gpu_us, 1), fmt_int(s.hits), fmt_int(s.misses), fmt_int(s.drops),
            fmt_int(s.h2d_bytes), fmt_int(s.d2h_bytes)});
  }
  st.print();
  std::printf("\n");
  Table tt({"figure", "value"});
  tt.add({"trace", input.name});
  tt.add({"placement", r.placement + (c.write_through ? " (+ write-through store)" : "")});
  tt.add({"kv dtype", r.dtype});
  tt.add({"read mode",
          c.read == cuda::ReadMode::attend
              ? "attend (QSA attention, " + std::to_string(r.q_heads) + " query heads per row)"
              : "checksum (read every selected token into a checksum)"});
  if (c.read == cuda::ReadMode::attend) tt.add({"attention kernel", r.attend_kernel});
  if (!r.mirror_reads.empty()) tt.add({"mirror reads", r.mirror_reads});
  tt.add({"pool pages per layer", r.pool_pages > 0 ? fmt_int(r.pool_pages) : "-"});
  tt.add({"logical pages", fmt_int(r.num_pages)});
  tt.add({"forwards", fmt_int(t.forward)});
  tt.add({"GPU time, total", fmt_fixed(t.gpu_us / 1000.0, 3) + " ms"});
  tt.add({"GPU time per forward",
          fmt_fixed(us_per_forward(t), 2) + " us" +
              (c.read == cuda::ReadMode::attend ? " (layers' store .. attention, summed)"
                                                : " (whole forward)")});
  tt.add({"hits / misses / evictions",
          fmt_int(t.hits) + " / " + fmt_int(t.misses) + " / " + fmt_int(t.evictions)});
  if (c.policy == MirrorPolicy::prefetch)
    tt.add({"pages prefetched into the next layer's pool", fmt_int(t.prefetched)});
  const std::optional<double> hit_rate = replay_hit_rate(t);
  tt.add({"hit rate", hit_rate ? fmt_fixed(100.0 * *hit_rate, 2) + " %"
                               : std::string("n/a (no pool lookups)")});
  tt.add({"drops (pages past the width)", fmt_int(t.drops)});
  tt.add({"selected tokens read", fmt_int(t.selected_tokens)});
  tt.add({c.read == cuda::ReadMode::attend ? "selected pages not resident" : "non-resident reads",
          fmt_int(t.missing)});
  tt.add({"host -> device", fmt_bytes(static_cast<double>(t.h2d_bytes))});
  tt.add({"device -> host", fmt_bytes(static_cast<double>(t.d2h_bytes))});
  tt.add({c.read == cuda::ReadMode::attend ? "attention output digest" : "checksum",
          hex64(r.checksum)});
  if (c.step_phases) {
    const cuda::StepPhases& p = r.step_phases;
    tt.add({"steps beside the attention, us (medians)",
            p.launches > 0 ? describe(p) + "; " + fmt_int(p.launches) + " steps"
                           : std::string("none ran (every forward ran its step first)")});
  }
  if (r.verified) {
    if (c.read == cuda::ReadMode::checksum)
      tt.add({"expected checksum (CPU)", hex64(r.expected_checksum)});
    tt.add({"query / decision mismatches",
            fmt_int(r.query_mismatches) + " / " + fmt_int(r.decision_mismatches)});
    if (!r.first_mismatch.empty()) tt.add({"first mismatch", r.first_mismatch});
    if (!r.first_checksum_mismatch.empty())
      tt.add({"first checksum mismatch", r.first_checksum_mismatch});
  }
  tt.print();
}

// Exit status 2 with the first difference when --verify found one.
int verification_status(const cuda::ReplayConfig& c, const cuda::ReplayResult& r) {
  const cuda::ReplayStep& t = r.total;
  const bool checksum_differs =
      c.read == cuda::ReadMode::checksum && t.missing == 0 && r.checksum != r.expected_checksum;
  if (r.verified && (r.query_mismatches != 0 || r.decision_mismatches != 0 || checksum_differs)) {
    const std::string where = !r.first_mismatch.empty() ? r.first_mismatch
                              : !r.first_checksum_mismatch.empty()
                                  ? "checksum differs at " + r.first_checksum_mismatch
                                  : std::string("checksum differs");
    std::fprintf(stderr, "kvtier run: verification failed: %s\n", where.c_str());
    return 2;
  }
  return 0;
}
#endif

}  // namespace

int run_trace(const std::vector<std::string>& args) {
  po::options_description desc = run_trace_options();
  po::variables_map vm;
  if (!parse_options(
          args, desc, vm,
          "kvtier run --trace FILE --placement device|mirror|host [--pool-pages N] "
          "[--kv-dtype bf16|fp8] [--read attend|checksum] [--json]\n\n"
          "Replays a selection trace on the GPU with real K/V pages in the chosen "
          "placement. GPU time per forward: attend, the QSA layers back to back (one CUDA "
          "graph without --verify), each from its store (mirror: its table lookup or "
          "compaction) to the end of its attention, the mirror's residency steps included; "
          "the K/V and query generation runs before and is not timed; checksum, the whole "
          "forward including the generation of the K/V bytes."))
    return 0;
  if (!vm.count("trace")) throw ConfigError("run: --trace FILE is required");
  check_options(vm);
  // The trace before any device: a file that is not a trace is reported as such, GPU or not.
  const traces::TraceInput input = traces::file_trace(vm["trace"].as<std::string>());
#if defined(KVTIER_WITH_CUDA)
  std::optional<io::OutputFile> decisions;  // appears only when the replay completes
  cuda::ReplayConfig c = replay_config(vm, decisions);
  if (cuda::device_count() == 0)
    throw ConfigError("run: no CUDA device (cudaGetDeviceCount found none)");
  std::unique_ptr<Progress> progress;
  c.on_forward = [&](std::int64_t done, std::int64_t total) {
    if (!progress)
      progress = std::make_unique<Progress>("run", static_cast<std::uint64_t>(total), "forwards");
    progress->update(static_cast<std::uint64_t>(done));
  };
  const cuda::ReplayResult r = cuda::replay_trace(input, c);
  if (decisions) decisions->close();
  if (progress) progress->finish();
  if (vm.count("json")) {
    print_replay_json(input, c, r);
  } else {
    print_replay_table(input, c, r, vm["steps"].as<int>());
  }
  return verification_status(c, r);
#else
  (void)input;
  throw ConfigError("run: this kvtier was built without the CUDA backend");
#endif
}

}  // namespace kvtier::cli
