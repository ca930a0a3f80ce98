#pragma once
#include <boost/program_options.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/device_budget.hpp"
#include "model/geometry.hpp"

namespace kvtier::cli {

namespace po = boost::program_options;

// Parses `args` (args[0] is the command's name) against `desc`. Returns false after printing
// help to stdout when --help was given; throws ConfigError on unknown or malformed options.
bool parse_options(const std::vector<std::string>& args, const po::options_description& desc,
                   po::variables_map& vm, const std::string& usage_line,
                   const po::positional_options_description* positional = nullptr);

// The items of a comma-separated option, as std::getline splits them ("a,,b": a, "", b; "a,": a;
// empty text: none).
std::vector<std::string> comma_items(const std::string& text);

// "4096,16384": positive integers separated by commas (empty text: none). Throws ConfigError
// "OPTION: expected positive WHAT separated by commas, got 'ITEM'" at the first bad item.
std::vector<std::int64_t> parse_positive_list(const std::string& text, const std::string& option,
                                              const std::string& what);

// A micro-batch option (--micro-batches of run, sim and plan): "auto" (nullopt) or one count
// 1..max. ConfigError "OPTION: auto or one count 1..MAX, got 'TEXT'" otherwise.
std::optional<int> parse_count_or_auto(const std::string& text, const std::string& option,
                                       std::int64_t max);

// A memory size option in GiB (--host-gib, budget's --device-gib) in bytes: a finite number
// from 0 (not checked) to kMaxDeviceGiB; ConfigError naming the option otherwise.
std::int64_t gib_option(const po::variables_map& vm, const std::string& name);

// The KV tier's device budget from --device-kv-gib (absent: the card's memory), against the
// card's memory in GiB (0: not known); `card` names where the card's size comes from ("profile
// h200-pcie5", "--device-gib"). ConfigError naming --device-kv-gib for a bad value.
DeviceBudget device_kv_budget(const po::variables_map& vm, double card_gib,
                              const std::string& card);
// --help, --trace (default: the bundled sample) and --profile (default h200-pcie5), as the
// simulator's commands (sim, plan) open their options.
void add_trace_profile_options(po::options_description& desc);
// The --device-kv-gib option with its help text (`card`: where the default comes from).
void add_device_kv_option(po::options_description& desc, const std::string& card);

// Reads a whole text file; throws ConfigError naming the path when it cannot.
std::string read_text_file(const std::string& path);

// A geometry JSON file (--geometry FILE). Throws ConfigError "geometry file 'PATH': ..." that
// goes on with the field at fault and what it expected (or where the JSON stopped).
Geometry read_geometry_file(const std::string& path);

}  // namespace kvtier::cli
