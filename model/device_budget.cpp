#include "model/device_budget.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/config_error.hpp"

namespace kvtier {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double v, const char* fmt = "%.1f GiB") {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

}  // namespace

std::int64_t gib_to_bytes(double gib) {
  return static_cast<std::int64_t>(gib * kGiB);
}

DeviceBudget device_budget(double card_gib, std::optional<double> kv_gib, const std::string& card,
                           const std::string& option) {
  DeviceBudget b;
  b.card_bytes = card_gib > 0 ? gib_to_bytes(card_gib) : 0;
  b.kv_is_card = !kv_gib.has_value();
  if (b.kv_is_card) {
    b.kv_bytes = b.card_bytes;
    return b;
  }
  const double v = *kv_gib;
  const double most = card_gib > 0 ? card_gib : kMaxDeviceGiB;
  // NaN fails both comparisons: refused with the rest.
  if (!(v > 0 && v <= most)) {
    const std::string limit = card_gib > 0
                                  ? "the card's " + gib(card_gib, "%g GiB") + " (" + card + ")"
                                  : gib(kMaxDeviceGiB, "%.0f GiB");
    throw ConfigError(option +
                      ": the device memory the KV tier may use, in GiB: above 0 and at most " +
                      limit + "; got " + gib(v, "%g"));
  }
  b.kv_bytes = std::max<std::int64_t>(1, gib_to_bytes(v));
  return b;
}

std::string budget_option_value(std::int64_t bytes) {
  return gib(std::ceil(static_cast<double>(bytes) / kGiB * 100) / 100, "%.2f");
}

std::string describe(const DeviceBudget& b) {
  const double kv = static_cast<double>(b.kv_bytes) / kGiB;
  if (b.card_bytes <= 0) return "KV budget " + gib(kv);
  const double card = static_cast<double>(b.card_bytes) / kGiB;
  std::string s = "card " + gib(card) + ", KV budget " + gib(kv);
  if (b.kv_is_card) s += " (the card's memory, the default; --device-kv-gib sets it)";
  return s + ", " + gib(static_cast<double>(b.left_bytes()) / kGiB) +
         " left for weights and activations";
}

}  // namespace kvtier
