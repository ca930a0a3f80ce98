#include "model/profile_trust.hpp"

#include <cstdio>
#include <vector>

namespace kvtier {
namespace {

std::string joined(const std::vector<std::string>& fields) {
  std::string s;
  for (const std::string& f : fields)
    s += (s.empty() ? "" : ", ") + f;
  return s;
}

}  // namespace

bool validation_covers(std::string_view field) {
  return field != "device_memory_gib" && field != "non_qsa_forward_us" &&
         field != "non_qsa_token_us";
}

std::string trust_line(const HardwareProfile& p) {
  const auto& d = p.derived_from;
  if (p.scaled_from_datasheets) return "scaled from datasheets, not validated";
  if (!p.validation) {
    if (d && !d->voided_validation.empty()) {
      // Never the base's figures: they were measured with values this profile replaced.
      return "not validated: " + joined(d->voided_validation) + " changed over " + d->base +
             ", whose validation does not carry over";
    }
    return "not validated";
  }
  const ProfileValidation& v = *p.validation;
  char buf[160];
  std::snprintf(buf, sizeof buf, ": decode median error %.1f %%, p95 %.1f %%",
                100 * v.decode_median_error, 100 * v.decode_p95_error);
  // What the figures hold: the trace replay's forwards (store, residency step, attend), not the
  // model forward's projections, index and top-k (validation/results/ has those runs apart).
  std::string line =
      "validated on " + v.card + " " + v.date + " against the GPU trace replay" + buf;
  if (v.prefill_median_error) {
    std::snprintf(buf, sizeof buf, ", prefill median error %.1f %%", 100 * *v.prefill_median_error);
    line += buf;
  }
  if (v.model_decode_median_error && v.model_decode_worst_error) {
    std::snprintf(buf, sizeof buf,
                  "; the model forward against the runner: decode median error "
                  "%.1f %%, worst %.1f %%",
                  100 * *v.model_decode_median_error, 100 * *v.model_decode_worst_error);
    line += buf;
    if (v.model_prefill_worst_error) {
      std::snprintf(buf, sizeof buf, ", prefill worst %.1f %%", 100 * *v.model_prefill_worst_error);
      line += buf;
    }
  }
  if (d) {
    // Kept only when every changed field lies outside the validation (model/profile_override).
    line += " (as " + d->base;
    if (!d->changed.empty()) {
      line += "; changed here, outside what the validation covers: " + joined(d->changed);
    }
    line += ")";
  }
  return line;
}

}  // namespace kvtier
