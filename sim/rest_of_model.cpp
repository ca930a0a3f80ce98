#include "sim/rest_of_model.hpp"

#include <cmath>

#include "model/config_error.hpp"

namespace kvtier::sim {
namespace {

// How one figure was come by, from its source.
std::string kind(const std::string& source, const std::string& profile) {
  if (source.starts_with("given")) return "given";
  if (source.starts_with("fitted")) return "fitted in profile " + profile;
  return "estimate from profile " + profile;
}

}  // namespace

double RestOfModel::total_us(std::int64_t forwards, std::int64_t tokens) const {
  return static_cast<double>(forwards) * forward_us + static_cast<double>(tokens) * token_us;
}

RestOfModel rest_of_model(const HardwareProfile& p) {
  RestOfModel r;
  r.forward_us = p.non_qsa_forward_us;
  r.token_us = p.non_qsa_token_us;
  r.forward_source = p.source("non_qsa_forward_us");
  r.token_source = p.source("non_qsa_token_us");
  const std::string f = kind(r.forward_source, p.name), t = kind(r.token_source, p.name);
  if (f == t) {
    r.label = f == "given" ? "given (--non-qsa-forward-us, --non-qsa-token-us)" : f;
  } else {
    r.label = "per forward: " + (f == "given" ? "given (--non-qsa-forward-us)" : f) +
              "; per token: " + (t == "given" ? "given (--non-qsa-token-us)" : t);
  }
  return r;
}

void give_rest_of_model(HardwareProfile& p, std::optional<double> forward_us,
                        std::optional<double> token_us) {
  auto check = [](double v, const char* option) {
    if (!std::isfinite(v) || v < 0) {
      throw ConfigError(std::string(option) + ": expected a time >= 0 in us");
    }
  };
  if (forward_us) {
    check(*forward_us, "--non-qsa-forward-us");
    p.set("non_qsa_forward_us", *forward_us, kGivenForward);
  }
  if (token_us) {
    check(*token_us, "--non-qsa-token-us");
    p.set("non_qsa_token_us", *token_us, kGivenToken);
  }
}

boost::json::object rest_of_model_json(const RestOfModel& r, double total_us) {
  return {
      {"us", total_us},   {"forward_us", r.forward_us},         {"token_us", r.token_us},
      {"label", r.label}, {"forward_source", r.forward_source}, {"token_source", r.token_source}};
}

}  // namespace kvtier::sim
