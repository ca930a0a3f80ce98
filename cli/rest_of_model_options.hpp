#pragma once
#include <string>

#include "cli/options.hpp"
#include "model/hardware_profile.hpp"
#include "sim/rest_of_model.hpp"

namespace kvtier::cli {

// --non-qsa-forward-us and --non-qsa-token-us, for plan and sim: the rest of the model as an
// input (sim/rest_of_model.hpp). Without them the profile's figures stand, labelled by their
// source (an estimate unless fitted).
void add_rest_of_model_options(po::options_description& desc);
// The profile named by --profile with the figures the user gave put in.
HardwareProfile profile_with_rest_of_model(const po::variables_map& vm);

// "1500.0 us per forward + 10.000 us per token: estimate from profile h200-pcie5".
std::string rest_figures(const sim::RestOfModel& rest);

}  // namespace kvtier::cli
