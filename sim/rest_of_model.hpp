#pragma once
#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "model/hardware_profile.hpp"

namespace kvtier::sim {

// The layers QSA does not run (the reference model's 36 of 48, and its MoE): nothing here
// measures them, so their time is an input with a source, never folded silently into the
// figures. The simulator prices them per forward and per token (non_qsa_forward_us,
// non_qsa_token_us); plan and sim print the QSA stack's time and this rest apart.
struct RestOfModel {
  double forward_us = 0;
  double token_us = 0;
  std::string forward_source;  // the profile field's source
  std::string token_source;
  // "given (--non-qsa-forward-us, --non-qsa-token-us)", "estimate from profile NAME",
  // "fitted in profile NAME", or one per figure when they differ.
  std::string label;

  // The rest's time over `forwards` forwards of `tokens` tokens in all, us.
  double total_us(std::int64_t forwards, std::int64_t tokens) const;
};

inline constexpr const char* kGivenForward = "given on the command line (--non-qsa-forward-us)";
inline constexpr const char* kGivenToken = "given on the command line (--non-qsa-token-us)";

RestOfModel rest_of_model(const HardwareProfile& p);

// Puts the figures the user gave into the profile, with kGivenForward / kGivenToken as their
// sources. Throws ConfigError for a negative or non-finite figure (0 is allowed: the QSA stack
// alone).
void give_rest_of_model(HardwareProfile& p, std::optional<double> forward_us,
                        std::optional<double> token_us);

// {"us": total_us, "forward_us", "token_us", "label", "forward_source", "token_source"}: what
// plan and sim print as "rest_of_model".
boost::json::object rest_of_model_json(const RestOfModel& r, double total_us);

}  // namespace kvtier::sim
