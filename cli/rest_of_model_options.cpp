#include "cli/rest_of_model_options.hpp"

#include "cli/table.hpp"
#include "sim/profiles.hpp"

namespace kvtier::cli {

void add_rest_of_model_options(po::options_description& desc) {
  desc.add_options()("non-qsa-forward-us", po::value<double>(),
                     "the non-QSA layers' time per forward, us (default: the profile's "
                     "estimate)")("non-qsa-token-us", po::value<double>(),
                                  "the non-QSA layers' time per token, us (default: the "
                                  "profile's estimate)");
}

HardwareProfile profile_with_rest_of_model(const po::variables_map& vm) {
  HardwareProfile p = sim::load_profile(vm["profile"].as<std::string>());
  auto given = [&](const char* name) {
    return vm.count(name) ? std::optional<double>(vm[name].as<double>()) : std::nullopt;
  };
  sim::give_rest_of_model(p, given("non-qsa-forward-us"), given("non-qsa-token-us"));
  return p;
}

std::string rest_figures(const sim::RestOfModel& rest) {
  return fmt_fixed(rest.forward_us, 1) + " us per forward + " + fmt_fixed(rest.token_us, 3) +
         " us per token: " + rest.label;
}

}  // namespace kvtier::cli
