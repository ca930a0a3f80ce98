#include "model/profile_trust.hpp"

#include <cstdio>

namespace kvtier {

std::string trust_line(const HardwareProfile& p) {
  if (p.scaled_from_datasheets) return "scaled from datasheets, not validated";
  if (!p.validation) return "not validated";
  const ProfileValidation& v = *p.validation;
  char buf[160];
  std::snprintf(buf, sizeof buf, ": decode median error %.1f %%, p95 %.1f %%",
                100 * v.decode_median_error, 100 * v.decode_p95_error);
  std::string line = "validated on " + v.card + " " + v.date + buf;
  if (v.prefill_median_error) {
    std::snprintf(buf, sizeof buf, ", prefill median error %.1f %%", 100 * *v.prefill_median_error);
    line += buf;
  }
  return line;
}

}  // namespace kvtier
