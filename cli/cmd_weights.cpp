// `kvtier weights`: deterministic synthetic weights of a QSA stack (gen), the tensors of a
// safetensors file (info), and the check of a file against a geometry (check).
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/table.hpp"
#include "cuda/weights/qsa_tensors.hpp"
#include "cuda/weights/safetensors.hpp"
#include "cuda/weights/synth.hpp"
#include "model/config_error.hpp"

namespace kvtier::cli {
namespace {

using namespace kvtier::weights;

std::vector<std::string> sub_args(const std::vector<std::string>& args, const std::string& sub) {
  std::vector<std::string> out{args[0] + " " + sub};
  out.insert(out.end(), args.begin() + 2, args.end());
  return out;
}

Geometry geometry_option(const po::variables_map& vm) {
  Geometry g;
  if (vm.count("geometry")) g = read_geometry_file(vm["geometry"].as<std::string>());
  g.validate();
  return g;
}

// Says on stderr how big the file will be before writing it, and refuses one that the disk
// it goes to has no room for.
void say_size_or_refuse(const std::string& out, const std::vector<QsaTensor>& tensors) {
  std::int64_t bytes = 0;
  for (const QsaTensor& t : tensors)
    if (__builtin_add_overflow(bytes, t.spec.bytes(), &bytes))
      throw ConfigError("--out " + out + ": the tensors of this geometry exceed 2^63 bytes");
  std::fprintf(stderr, "kvtier weights gen: writing %s (%zu tensors) to %s\n",
               fmt_bytes(static_cast<double>(bytes)).c_str(), tensors.size(), out.c_str());
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(out, ec).parent_path();
  const std::filesystem::space_info disk = std::filesystem::space(dir, ec);
  if (!ec && disk.available < static_cast<std::uintmax_t>(bytes))
    throw ConfigError("--out " + out + ": the file needs " + fmt_bytes(static_cast<double>(bytes)) +
                      ", the disk holding '" + dir.string() + "' has " +
                      fmt_bytes(static_cast<double>(disk.available)) + " free");
}

// ------------------------------------------------------------------------------------ gen
int run_gen(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("geometry", po::value<std::string>(),
                                                 "geometry JSON file (default: Flash-Next)")(
      "vocab", po::value<std::int64_t>()->default_value(32000), "vocabulary size")(
      "seed", po::value<std::uint64_t>()->default_value(1), "seed")(
      "needle", "plant the needle construction (docs/needle.md)")(
      "out", po::value<std::string>(), "output .safetensors file")("json", "print a JSON summary");
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "kvtier weights gen [--geometry FILE] [--vocab N] [--seed S] [--needle] "
                     "--out W.safetensors"))
    return 0;
  if (!vm.count("out")) throw ConfigError("--out is required");
  const Geometry g = geometry_option(vm);
  const std::int64_t vocab = vm["vocab"].as<std::int64_t>();
  if (vocab < 1 || vocab > kMaxVocab)
    throw ConfigError("--vocab: 1.." + std::to_string(kMaxVocab) + " token ids, got " +
                      std::to_string(vocab));
  SynthOptions opt;
  opt.seed = vm["seed"].as<std::uint64_t>();
  opt.needle = vm.count("needle") > 0;
  const std::string out = vm["out"].as<std::string>();
  say_size_or_refuse(out, qsa_tensors(g, vocab));
  {
    Progress progress("kvtier weights gen", 0, "MiB", std::uint64_t{1} << 20);
    write_synthetic_weights(out, g, vocab, opt, [&](std::int64_t done, std::int64_t total) {
      progress.update(static_cast<std::uint64_t>(done), static_cast<std::uint64_t>(total));
    });
  }
  SafetensorsFile f(out);
  check_qsa_weights(f, g, vocab);
  if (vm.count("json")) {
    boost::json::object o{{"path", out},
                          {"tensors", f.tensors().size()},
                          {"bytes", f.file_bytes()},
                          {"seed", opt.seed},
                          {"vocab", vocab},
                          {"needle", opt.needle}};
    std::cout << boost::json::serialize(o) << "\n";
  } else {
    std::printf("wrote %s: %zu tensors, %s, seed %llu%s\n", out.c_str(), f.tensors().size(),
                fmt_bytes(static_cast<double>(f.file_bytes())).c_str(),
                static_cast<unsigned long long>(opt.seed), opt.needle ? ", needle planted" : "");
  }
  return 0;
}

// ----------------------------------------------------------------------------------- info
int run_info(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("weights", po::value<std::string>(),
                                                 "safetensors file")("json", "print as JSON");
  po::positional_options_description pos;
  pos.add("weights", 1);
  po::variables_map vm;
  if (!parse_options(args, desc, vm, "kvtier weights info W.safetensors [--json]", &pos)) return 0;
  if (!vm.count("weights")) throw ConfigError("a weights file is required");
  SafetensorsFile f(vm["weights"].as<std::string>());
  std::int64_t data_bytes = 0;
  for (const TensorInfo& t : f.tensors())
    data_bytes += t.end - t.begin;
  if (vm.count("json")) {
    boost::json::array ts;
    for (const TensorInfo& t : f.tensors()) {
      boost::json::array shape;
      for (std::int64_t d : t.spec.shape)
        shape.push_back(d);
      ts.push_back({{"name", t.spec.name},
                    {"dtype", dtype_name(t.spec.dtype)},
                    {"shape", shape},
                    {"data_offsets", boost::json::array{t.begin, t.end}}});
    }
    boost::json::object meta;
    for (const auto& [k, v] : f.metadata())
      meta[k] = v;
    boost::json::object o{{"path", f.path()},
                          {"file_bytes", f.file_bytes()},
                          {"data_bytes", data_bytes},
                          {"tensors", ts},
                          {"metadata", meta}};
    std::cout << boost::json::serialize(o) << "\n";
    return 0;
  }
  Table table({"tensor", "dtype", "shape", "bytes"});
  for (const TensorInfo& t : f.tensors())
    table.add({t.spec.name, dtype_name(t.spec.dtype), shape_string(t.spec.shape),
               fmt_bytes(static_cast<double>(t.end - t.begin))});
  std::printf("%s: %zu tensors, %s of data, %s file\n\n", f.path().c_str(), f.tensors().size(),
              fmt_bytes(static_cast<double>(data_bytes)).c_str(),
              fmt_bytes(static_cast<double>(f.file_bytes())).c_str());
  table.print();
  if (!f.metadata().empty()) {
    std::printf("\nmetadata:\n");
    for (const auto& [k, v] : f.metadata())
      std::printf("  %s: %s\n", k.c_str(), v.c_str());
  }
  return 0;
}

// ---------------------------------------------------------------------------------- check
int run_check(const std::vector<std::string>& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("weights", po::value<std::string>(),
                                                 "safetensors file")(
      "geometry", po::value<std::string>(), "geometry JSON (default: the file's metadata)")(
      "vocab", po::value<std::int64_t>(), "vocabulary (default: the file's metadata)")(
      "json", "print the result as JSON");
  po::positional_options_description pos;
  pos.add("weights", 1);
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "kvtier weights check W.safetensors [--geometry FILE] [--vocab N] [--json]",
                     &pos))
    return 0;
  if (!vm.count("weights")) throw ConfigError("a weights file is required");
  SafetensorsFile f(vm["weights"].as<std::string>());
  const Geometry g = vm.count("geometry") ? geometry_option(vm) : file_geometry(f);
  const std::int64_t vocab = vm.count("vocab") ? vm["vocab"].as<std::int64_t>() : file_vocab(f);
  check_qsa_weights(f, g, vocab);  // a missing or misshapen tensor is an error, exit 1
  if (vm.count("json")) {
    std::cout << boost::json::serialize(boost::json::object{{"weights", f.path()},
                                                            {"ok", true},
                                                            {"qsa_layers", g.qsa_layers()},
                                                            {"hidden_size", g.hidden_size},
                                                            {"vocab", vocab}})
              << "\n";
    return 0;
  }
  std::printf("%s: ok, every tensor of %d QSA layers (hidden %d, vocab %lld) present\n",
              f.path().c_str(), g.qsa_layers(), g.hidden_size, static_cast<long long>(vocab));
  return 0;
}

int run_weights(const std::vector<std::string>& args) {
  const char* usage =
      "usage: kvtier weights <gen|info|check> [options]   (each takes --help)\n"
      "  gen    deterministic synthetic BF16 weights of a QSA stack (optionally with a needle)\n"
      "  info   the tensors of a safetensors file (--json)\n"
      "  check  that a file holds every tensor of a geometry with the right shape and dtype\n";
  if (args.size() < 2 || args[1] == "--help" || args[1] == "-h") {
    std::fputs(usage, args.size() < 2 ? stderr : stdout);
    return args.size() < 2 ? 2 : 0;
  }
  const std::string sub = args[1];
  const auto rest = sub_args(args, sub);
  if (sub == "gen") return run_gen(rest);
  if (sub == "info") return run_info(rest);
  if (sub == "check") return run_check(rest);
  throw ConfigError("unknown weights subcommand '" + sub + "' (gen, info, check)");
}

const CommandRegistrar reg{
    {"weights", "generate, list and check model weights (safetensors)", run_weights}};

}  // namespace
}  // namespace kvtier::cli
