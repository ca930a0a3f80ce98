#include "cli/options.hpp"

#include <algorithm>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "io/input_file.hpp"
#include "model/config_error.hpp"

namespace kvtier::cli {

namespace {

template <class T>
bool holds(const po::value_semantic* s) {
  return dynamic_cast<const po::typed_value<T>*>(s) != nullptr;
}

template <class T>
std::string integer_range() {
  return ": expected an integer from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
         std::to_string(std::numeric_limits<T>::max());
}

// What a value of the option named `name` ("--slots", "-n") must look like, from its type:
// ": expected an integer from A to B" or ": expected a number"; "" when not known.
std::string expected_value(const po::options_description& desc, const std::string& name) {
  const std::string key = name.substr(std::min(name.find_first_not_of('-'), name.size()));
  const po::option_description* d = desc.find_nothrow(key, false);
  if (!d) d = desc.find_nothrow(name, false);
  if (!d) return "";
  const po::value_semantic* s = d->semantic().get();
  if (holds<int>(s)) return integer_range<int>();
  if (holds<long>(s)) return integer_range<long>();
  if (holds<long long>(s)) return integer_range<long long>();
  if (holds<unsigned long>(s)) return integer_range<unsigned long>();
  if (holds<unsigned long long>(s)) return integer_range<unsigned long long>();
  if (holds<double>(s)) return ": expected a number";
  return "";
}

// Boost reads "-1" for an unsigned option as 2^64 - 1; a negative seed is a mistake to say.
void refuse_negative_unsigned(const po::options_description& desc,
                              const po::parsed_options& parsed) {
  for (const po::option& o : parsed.options) {
    const po::option_description* d = desc.find_nothrow(o.string_key, false);
    if (!d) continue;
    const po::value_semantic* s = d->semantic().get();
    if (!holds<unsigned long>(s) && !holds<unsigned long long>(s)) continue;
    for (const std::string& v : o.value)
      if (v.find('-') != std::string::npos)
        throw ConfigError("the argument ('" + v + "') for option '--" + o.string_key +
                          "' is invalid" + expected_value(desc, o.string_key));
  }
}

}  // namespace

bool parse_options(const std::vector<std::string>& args, const po::options_description& desc,
                   po::variables_map& vm, const std::string& usage_line,
                   const po::positional_options_description* positional) {
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    po::command_line_parser parser(rest);
    parser.options(desc);
    if (positional) parser.positional(*positional);
    const po::parsed_options parsed = parser.run();
    refuse_negative_unsigned(desc, parsed);
    po::store(parsed, vm);
    if (vm.count("help")) {
      std::cout << "usage: " << usage_line << "\n\n" << desc << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::invalid_option_value& e) {
    throw ConfigError(std::string(e.what()) + expected_value(desc, e.get_option_name()) + " (see " +
                      args[0] + " --help)");
  } catch (const po::error& e) {
    throw ConfigError(std::string(e.what()) + " (see " + args[0] + " --help)");
  }
  return true;
}

std::string read_text_file(const std::string& path) {
  try {
    return io::read_text_file(path);
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());
  }
}

Geometry read_geometry_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return geometry_from_json(text);
  } catch (const ConfigError& e) {
    throw ConfigError("geometry file '" + path + "': " + e.what());
  }
}

std::int64_t gib_option(const po::variables_map& vm, const std::string& name) {
  const double v = vm[name].as<double>();
  if (!(v >= 0 && v <= kMaxDeviceGiB)) {
    char got[64];
    std::snprintf(got, sizeof got, "%g", v);
    throw ConfigError("--" + name + ": a number of GiB from 0 (do not check) to " +
                      std::to_string(static_cast<long long>(kMaxDeviceGiB)) + ", got " + got);
  }
  return gib_to_bytes(v);
}

DeviceBudget device_kv_budget(const po::variables_map& vm, double card_gib,
                              const std::string& card) {
  std::optional<double> kv;
  if (vm.count("device-kv-gib")) kv = vm["device-kv-gib"].as<double>();
  return device_budget(card_gib, kv, card);
}

void add_trace_profile_options(po::options_description& desc) {
  desc.add_options()("help,h", "show this help")("trace", po::value<std::string>(),
                                                 "trace file (default: the bundled sample)")(
      "profile", po::value<std::string>()->default_value("h200-pcie5"),
      "hardware profile: a built-in name, or a .json file, complete or giving only what it "
      "changes over a \"base\" (docs/planner.md, \"Writing a profile\")");
}

void add_device_kv_option(po::options_description& desc, const std::string& card) {
  desc.add_options()("device-kv-gib", po::value<double>(),
                     ("device memory the KV tier may use, in GiB: pages, pool, staging window, "
                      "fold accumulator, selection and table buffers (default: " +
                      card + "); the rest of the card is left for the weights and activations")
                         .c_str());
}

std::vector<std::string> comma_items(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    out.push_back(item);
  return out;
}

std::vector<std::int64_t> parse_positive_list(const std::string& text, const std::string& option,
                                              const std::string& what) {
  std::vector<std::int64_t> out;
  for (const std::string& item : comma_items(text)) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw ConfigError(option + ": expected positive " + what + " separated by commas, got '" +
                        item + "'");
    }
  }
  return out;
}

std::optional<int> parse_count_or_auto(const std::string& text, const std::string& option,
                                       std::int64_t max) {
  if (text == "auto") return std::nullopt;
  const auto bad = [&] {
    return ConfigError(option + ": auto or one count 1.." + std::to_string(max) + ", got '" + text +
                       "'");
  };
  std::vector<std::int64_t> k;
  try {
    k = parse_positive_list(text, option, "counts");
  } catch (const ConfigError&) {
    throw bad();  // one message for every bad text: a list's would speak of commas
  }
  if (k.size() != 1 || k[0] > max) throw bad();
  return static_cast<int>(k[0]);
}

}  // namespace kvtier::cli
