#pragma once
// The attend's grid, one rule for the kernel and the cost model: the QSA attention
// (cuda/qsa attend) runs rows x KV heads x splits CTAs, each over about width / splits of its
// row's selected tokens, and the merge reads every CTA's partial result. The split count comes
// from here on the GPU (qsa::attend_default_splits, with the card's SM count) and in the
// simulator (with the profile's sm_count), so the CTAs the cost model prices are the ones the
// kernel launches.
#include <algorithm>
#include <cstdint>

namespace kvtier {

// The CTAs of the tensor-core kernel that run at once: 2 a multiprocessor.
constexpr int attend_wave_ctas(int sms) {
  return 2 * sms;
}

// One wave of the tensor-core kernel, at least one tile of 32 tokens per CTA:
// splits = clamp(2 sms / (rows x kv_heads), 1, ceil(width / 32)).
constexpr int attend_splits(int rows, int kv_heads, int width, int sms) {
  const int slots = attend_wave_ctas(sms);
  const int want = slots / std::max(1, rows * kv_heads);
  return std::clamp(want, 1, std::max(1, (width + 31) / 32));
}

// CTAs of the attend over `rows` rows of at most `width` selected tokens each.
constexpr std::int64_t attend_ctas(int rows, int kv_heads, int width, int sms) {
  return std::int64_t{rows} * kv_heads * attend_splits(rows, kv_heads, width, sms);
}

// The tokens each CTA of a row walks: every row's list of `width` entries is split in `splits`
// chunks (the kernel's chunk, ceil(width / splits)), so one wide row among narrow ones sets the
// attend's span.
constexpr int attend_chunk(int width, int splits) {
  return (std::max(0, width) + splits - 1) / splits;
}

// Tokens the longest CTA walks, at the split count the grid takes.
constexpr int attend_cta_tokens(int rows, int kv_heads, int width, int sms) {
  return attend_chunk(width, attend_splits(rows, kv_heads, width, sms));
}

}  // namespace kvtier
