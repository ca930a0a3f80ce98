#include "sim/stack_distance.hpp"

#include <algorithm>
#include <bit>

namespace kvtier::sim {
namespace {
constexpr std::int32_t kHole = -2;
constexpr std::int32_t kNone = -1;
}  // namespace

StackDistance::StackDistance(PageId num_pages) : last_(static_cast<std::size_t>(num_pages), -1) {
  resize(1024);
}

// Empty marks for times [0, cap).
void StackDistance::resize(std::int64_t cap) {
  cap_ = (cap + kBlock - 1) / kBlock * kBlock;
  const auto words = static_cast<std::size_t>(cap_ / 64);
  bits_.assign(words, 0);
  word_marks_.assign(words, 0);
  block_fen_.assign(static_cast<std::size_t>(cap_ / kBlock) + 1, 0);
}

void StackDistance::mark(std::int64_t t) {
  const auto w = static_cast<std::size_t>(t / 64);
  bits_[w] |= std::uint64_t{1} << (t % 64);
  ++word_marks_[w];
  for (auto k = static_cast<std::size_t>(t / kBlock) + 1; k < block_fen_.size(); k += k & (~k + 1))
    ++block_fen_[k];
}

void StackDistance::unmark(std::int64_t t) {
  const auto w = static_cast<std::size_t>(t / 64);
  bits_[w] &= ~(std::uint64_t{1} << (t % 64));
  --word_marks_[w];
  for (auto k = static_cast<std::size_t>(t / kBlock) + 1; k < block_fen_.size(); k += k & (~k + 1))
    --block_fen_[k];
}

std::int64_t StackDistance::marks_upto(std::int64_t t) const {
  std::int64_t n = 0;
  for (auto k = static_cast<std::size_t>(t / kBlock); k > 0; k -= k & (~k + 1))
    n += block_fen_[k];  // blocks before t's
  const auto w = static_cast<std::size_t>(t / 64);
  unsigned words = 0;  // whole words of t's block before t's word
  for (auto i = static_cast<std::size_t>(t / kBlock * (kBlock / 64)); i < w; ++i)
    words += word_marks_[i];
  const int bit = static_cast<int>(t % 64);
  const std::uint64_t upto = bit == 63 ? ~std::uint64_t{0} : (std::uint64_t{2} << bit) - 1;
  return n + words + std::popcount(bits_[w] & upto);
}

std::int64_t StackDistance::reference(PageId p) {
  const std::int64_t lt = last_[static_cast<std::size_t>(p)];
  std::int64_t depth = 0;
  // Every entry holds one mark below t_, so the marks after lt are live_ minus those in
  // [0, lt]; with p's own, that is its depth.
  if (lt >= 0) depth = live_ - marks_upto(lt) + 1;
  // The topmost hole above p's place absorbs the push-down: for pool sizes that reach the
  // hole but not p, the reference fills that free slot; for sizes that hold p the free slot
  // stays free. Both hold when the hole moves to p's old place (or, for a page not in the
  // stack, is used up).
  if (!holes_.empty() && holes_.top() > lt) {
    const std::int64_t h = holes_.top();
    holes_.pop();
    unmark(h);
    --live_;
    if (lt >= 0) holes_.push(lt);  // p's mark at lt stays, now a hole's
  } else if (lt >= 0) {
    unmark(lt);
    --live_;
  }
  last_[static_cast<std::size_t>(p)] = -1;  // its old place is gone (or a hole's) for renumber
  if (t_ == cap_) renumber();
  mark(t_);
  last_[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(t_);
  ++t_;
  ++live_;
  return depth;
}

void StackDistance::release(PageId p) {
  const std::int64_t lt = last_[static_cast<std::size_t>(p)];
  if (lt < 0) return;
  holes_.push(lt);
  last_[static_cast<std::size_t>(p)] = -1;
}

// Keeps the live entries in order at times 0..live-1, with room for three times as many
// again: a renumber (O(pages + capacity)) every >= 3 x live references.
void StackDistance::renumber() {
  owner_.assign(static_cast<std::size_t>(cap_), kNone);
  for (std::size_t p = 0; p < last_.size(); ++p) {
    if (last_[p] >= 0) owner_[static_cast<std::size_t>(last_[p])] = static_cast<std::int32_t>(p);
  }
  while (!holes_.empty()) {
    owner_[static_cast<std::size_t>(holes_.top())] = kHole;
    holes_.pop();
  }
  std::int64_t n = 0;
  for (std::size_t t = 0; t < owner_.size(); ++t) {
    if (owner_[t] != kNone) owner_[static_cast<std::size_t>(n++)] = owner_[t];
  }
  resize(std::max<std::int64_t>(1024, 4 * n));
  std::vector<std::int64_t> holes;
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int32_t o = owner_[static_cast<std::size_t>(t)];
    if (o == kHole) {
      holes.push_back(t);
    } else {
      last_[static_cast<std::size_t>(o)] = static_cast<std::int32_t>(t);
    }
    bits_[static_cast<std::size_t>(t / 64)] |= std::uint64_t{1} << (t % 64);
    ++word_marks_[static_cast<std::size_t>(t / 64)];
  }
  holes_ = std::priority_queue<std::int64_t>(std::less<std::int64_t>(), std::move(holes));
  // Linear Fenwick build: each block's count, then every node adds itself to its parent.
  for (std::int64_t b = 0; b * kBlock < n; ++b)
    block_fen_[static_cast<std::size_t>(b) + 1] =
        static_cast<std::int32_t>(std::min(kBlock, n - b * kBlock));
  for (std::size_t k = 1; k < block_fen_.size(); ++k) {
    const std::size_t up = k + (k & (~k + 1));
    if (up < block_fen_.size()) block_fen_[up] += block_fen_[k];
  }
  owner_.clear();
  owner_.shrink_to_fit();
  t_ = n;
}

std::int64_t StackDistance::memory_bytes() const {
  return static_cast<std::int64_t>(
      last_.capacity() * sizeof(std::int32_t) + bits_.capacity() * sizeof(std::uint64_t) +
      word_marks_.capacity() + block_fen_.capacity() * sizeof(std::int32_t) +
      holes_.size() * sizeof(std::int64_t));
}

}  // namespace kvtier::sim
