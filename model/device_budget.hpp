#pragma once
// The device memory the KV tier may use (B, `--device-kv-gib`) against the card's memory:
// the weights and activations take the rest of the card, so a deployment gives the KV tier
// a budget below the card's size and every placement must live within it (docs/planner.md,
// "The device budget").
#include <cstdint>
#include <optional>
#include <string>

namespace kvtier {

// The most memory a budget may name when the card's size is not known: 1 PiB, far past any
// card and far below what an int64 byte count holds.
inline constexpr double kMaxDeviceGiB = 1024.0 * 1024.0;

struct DeviceBudget {
  std::int64_t card_bytes = 0;  // the card's memory; 0: not known
  std::int64_t kv_bytes = 0;    // B: what the KV tier may use; 0: not checked
  bool kv_is_card = true;       // B was not given, so it is the card's memory
  // What B leaves on the card for the weights and activations (0 when the card is unknown).
  std::int64_t left_bytes() const { return card_bytes > 0 ? card_bytes - kv_bytes : 0; }
};

std::int64_t gib_to_bytes(double gib);

// B from the option's value (`kv_gib`, absent: the card's memory) and the card's memory in
// GiB (0: not known). Throws ConfigError naming `option` for a B that is not a finite number
// above 0, or that is above the card's memory (saying the card's size, `card` names it), or
// above kMaxDeviceGiB when the card is not known.
DeviceBudget device_budget(double card_gib, std::optional<double> kv_gib, const std::string& card,
                           const std::string& option = "--device-kv-gib");

// The --device-kv-gib value (GiB, two decimals) that fits what needs `bytes`: rounded up to
// the hundredth of a GiB, so that the budget it names does fit.
std::string budget_option_value(std::int64_t bytes);

// "card 141.0 GiB, KV budget 24.0 GiB, 117.0 GiB left for weights and activations"; with the
// default B, "KV budget 141.0 GiB (the card's memory: --device-kv-gib sets it)".
std::string describe(const DeviceBudget& b);

}  // namespace kvtier
