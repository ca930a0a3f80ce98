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
#include "model/victims_queue.hpp"

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
    QueueVictims finder(slots);
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

}  // namespace
}  // namespace kvtier::bench
