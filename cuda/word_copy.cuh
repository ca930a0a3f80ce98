#pragma once
// Word-wise moves of page bytes shared by the data kernels and the one-launch residency step:
// every move uses words of W bytes, W the largest of 16, 8, 4, 2, 1 dividing every token's bytes
// of every bank, so every page and token offset is W-aligned.
#include <cstdint>

#include "cuda/kernels.hpp"

namespace kvtier::cuda::words {

struct alignas(16) Word16 {
  unsigned long long lo, hi;
};

template <int W>
struct WordOf;
template <>
struct WordOf<16> {
  using type = Word16;
};
template <>
struct WordOf<8> {
  using type = unsigned long long;
};
template <>
struct WordOf<4> {
  using type = unsigned int;
};
template <>
struct WordOf<2> {
  using type = unsigned short;
};
template <>
struct WordOf<1> {
  using type = unsigned char;
};

// Words of each bank kind per token, and per token over the layer's banks.
struct WordPlan {
  std::int64_t token_words[4];
  std::int64_t layer_token_words;
  int kinds;
};

inline int word_bytes(const PageLayout& l) {
  std::int64_t g = l.token_bytes(BankKind::k);
  if (l.fp8()) g |= l.token_bytes(BankKind::k_scale);
  for (int w : {16, 8, 4, 2})
    if (g % w == 0) return w;
  return 1;
}

inline WordPlan plan_for(const PageLayout& l, int w) {
  WordPlan p{};
  p.kinds = l.banks_per_layer;
  for (int k = 0; k < p.kinds; ++k) {
    p.token_words[k] = l.token_bytes(PageLayout::kind_of(k)) / w;
    p.layer_token_words += p.token_words[k];
  }
  return p;
}

inline constexpr int kBatch = 4;  // independent words in flight per thread

// The multi-bank copy of every miss in p.copies[0, *p.count): word v of
// count * layers * page_size * layer_token_words, for v = thread, thread + threads, ...
template <int W>
__device__ inline void copy_pages(const CopyParams& p, const WordPlan& plan, std::int64_t thread,
                                  std::int64_t threads) {
  using Word = typename WordOf<W>::type;
  const std::int64_t layer_words = plan.layer_token_words * p.layout.page_size;
  const std::int64_t per_copy = layer_words * p.layers;
  const std::int64_t total = std::int64_t{*p.count} * per_copy;
  for (std::int64_t v0 = thread; v0 < total; v0 += threads * kBatch) {
    Word vals[kBatch];
    Word* dst[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const std::int64_t v = v0 + b * threads;
      dst[b] = nullptr;
      if (v >= total) continue;
      const std::int64_t c = v / per_copy;
      std::int64_t r = v - c * per_copy;
      const std::int64_t l = r / layer_words;
      r -= l * layer_words;
      int k = 0;
      while (k + 1 < plan.kinds && r >= plan.token_words[k] * p.layout.page_size) {
        r -= plan.token_words[k] * p.layout.page_size;
        ++k;
      }
      const std::int64_t bank = (p.first_layer + l) * p.layout.banks_per_layer + k;
      const std::int64_t page_words = plan.token_words[k] * p.layout.page_size;
      const CopyOp op = p.copies[c];
      const Word* src = reinterpret_cast<const Word*>(p.host[bank]) + op.page * page_words + r;
      dst[b] = reinterpret_cast<Word*>(p.pool[bank]) + op.slot * page_words + r;
      vals[b] = *src;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      if (dst[b] != nullptr) *dst[b] = vals[b];
  }
}

// Launch<W>::run(args...) for the word size w.
template <template <int> class Launch, class... Args>
void dispatch_word(int w, Args&&... args) {
  switch (w) {
    case 16:
      Launch<16>::run(args...);
      break;
    case 8:
      Launch<8>::run(args...);
      break;
    case 4:
      Launch<4>::run(args...);
      break;
    case 2:
      Launch<2>::run(args...);
      break;
    default:
      Launch<1>::run(args...);
      break;
  }
}

}  // namespace kvtier::cuda::words
