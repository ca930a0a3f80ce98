// The page-stream generator behind bench/sim/bench_stream (issue 16, item 9): a repeatable
// stream (the same seed gives the same pages), in range, uniform or skewed as asked; and its
// replay one request per step is plain LRU, which is what the benchmark compares against.
#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <unordered_map>
#include <vector>

#include "bench/sim/page_stream.hpp"
#include "model/ensure.hpp"
#include "model/victims_fifo.hpp"
#include "model/victims_heap.hpp"

namespace kvtier::bench {
namespace {

// The share of requests that go to the most requested tenth of the pages.
double top_tenth_share(const std::vector<PageId>& s, PageId pages) {
  std::vector<std::int64_t> count(static_cast<std::size_t>(pages), 0);
  for (PageId p : s)
    ++count[static_cast<std::size_t>(p)];
  std::sort(count.begin(), count.end(), std::greater<>());
  std::int64_t top = 0;
  for (std::size_t i = 0; i < count.size() / 10; ++i)
    top += count[i];
  return static_cast<double>(top) / static_cast<double>(s.size());
}

TEST(PageStream, SameSeedSameStreamOtherSeedOtherStream) {
  for (double zipf : {0.0, 0.8, 1.0}) {
    const PageStreamParams p{.seed = 7, .requests = 5000, .pages = 1000, .zipf = zipf};
    const auto a = make_page_stream(p);
    EXPECT_EQ(make_page_stream(p), a) << "zipf " << zipf;
    PageStreamParams q = p;
    q.seed = 8;
    EXPECT_NE(make_page_stream(q), a) << "zipf " << zipf;
    ASSERT_EQ(a.size(), 5000u);
    for (PageId x : a)
      ASSERT_TRUE(x >= 0 && x < 1000) << x;
  }
}

TEST(PageStream, UniformCoversTheSpaceAndZipfIsSkewed) {
  const PageId pages = 1024;
  const auto uniform = make_page_stream({.seed = 3, .requests = 100000, .pages = pages});
  std::vector<bool> seen(pages, false);
  for (PageId x : uniform)
    seen[static_cast<std::size_t>(x)] = true;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), pages);
  EXPECT_LT(top_tenth_share(uniform, pages), 0.15);
  // P(rank r) ~ (r + 1)^-0.8: the top tenth of the ranks draws about half of the requests.
  const auto zipf = make_page_stream({.seed = 3, .requests = 100000, .pages = pages, .zipf = 0.8});
  EXPECT_GT(top_tenth_share(zipf, pages), 0.4);
  EXPECT_LT(top_tenth_share(zipf, pages), 0.65);
}

// A textbook LRU (list + map), sharing no code with the core.
std::int64_t lru_misses(const std::vector<PageId>& s, std::size_t capacity) {
  std::list<PageId> order;  // most recent first
  std::unordered_map<PageId, std::list<PageId>::iterator> where;
  std::int64_t misses = 0;
  for (PageId p : s) {
    auto it = where.find(p);
    if (it != where.end()) {
      order.splice(order.begin(), order, it->second);
      continue;
    }
    ++misses;
    if (order.size() == capacity) {
      where.erase(order.back());
      order.pop_back();
    }
    order.push_front(p);
    where[p] = order.begin();
  }
  return misses;
}

TEST(PageStream, OneRequestPerStepThroughTheCoreIsPlainLru) {
  for (double zipf : {0.0, 0.8}) {
    const PageId pages = 512;
    const SlotId slots = 100;
    const auto s = make_page_stream({.seed = 5, .requests = 20000, .pages = pages, .zipf = zipf});
    ResidencyState st(pages, slots);
    FifoVictims finder(slots);
    PageId miss[1];
    SlotId victim[1];
    CopyOp copy[1];
    std::int64_t misses = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const EnsureResult r = ensure_pages(st.view(), &s[i], 1, static_cast<std::int64_t>(i), finder,
                                          {miss, victim, nullptr}, copy);
      ASSERT_EQ(r.status, EnsureStatus::ok);
      misses += r.misses;
    }
    EXPECT_EQ(misses, lru_misses(s, static_cast<std::size_t>(slots))) << "zipf " << zipf;
  }
}

// The finders decide alike on the benchmark's kinds of stream, scaled down (uniform and Zipf,
// 1 to 1,000 requests a step, with and without releases between steps): every copy, hit count
// and release result of the FIFO finder (the simulator's) against the heap finder's, step by
// step. The pools outgrow the hint threshold (2^15 slots) in two
// streams, so the hinted paths decide too.
TEST(PageStream, FinderChoicesAgreeOnEveryCopy) {
  struct Case {
    double zipf;
    PageId pages;
    SlotId slots;
    int per_step, release_every;
    std::int64_t requests;
  };
  const Case cases[] = {
      {0.0, 4096, 1024, 1, 0, 200000},       {0.0, 1 << 17, 1 << 15, 1, 0, 200000},
      {0.8, 1 << 18, 1 << 15, 1, 5, 200000}, {0.0, 1 << 14, 1 << 12, 64, 0, 200000},
      {0.0, 1 << 14, 1 << 10, 7, 3, 100000}, {0.8, 1 << 16, 1 << 13, 1000, 2, 200000}};
  for (const Case& c : cases) {
    const auto s =
        make_page_stream({.seed = 16, .requests = c.requests, .pages = c.pages, .zipf = c.zipf});
    ResidencyState sf(c.pages, c.slots), sh(c.pages, c.slots);
    FifoVictims ff(c.slots);
    HeapVictims fh(c.slots);
    const auto n = static_cast<std::size_t>(c.per_step);
    std::vector<PageId> miss(n);
    std::vector<SlotId> victims(n);
    std::vector<CopyOp> cf(n), ch(n);
    std::int64_t step = 0;
    for (std::size_t i = 0; i + n <= s.size(); i += n, ++step) {
      const auto rf = ensure_pages(sf.view(), &s[i], c.per_step, step, ff,
                                   {miss.data(), victims.data(), nullptr}, cf.data());
      const auto rh = ensure_pages(sh.view(), &s[i], c.per_step, step, fh,
                                   {miss.data(), victims.data(), nullptr}, ch.data());
      ASSERT_EQ(rf.status, EnsureStatus::ok);
      ASSERT_EQ(rf.hits, rh.hits) << "pages " << c.pages << " step " << step;
      ASSERT_EQ(rf.misses, rh.misses);
      const auto m = static_cast<std::size_t>(rf.misses);
      ASSERT_TRUE(std::equal(cf.begin(), cf.begin() + m, ch.begin()))
          << "pages " << c.pages << " step " << step;
      if (c.release_every > 0 && step % c.release_every == 0) {
        const PageId p = s[i + static_cast<std::size_t>(step) % n];
        const bool released = release_page(sf.view(), p, ff);
        ASSERT_EQ(release_page(sh.view(), p, fh), released);
      }
    }
    EXPECT_EQ(sf, sh);
  }
}

}  // namespace
}  // namespace kvtier::bench
