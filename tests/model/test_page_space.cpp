#include <gtest/gtest.h>

#include <vector>

#include "model/capacity_error.hpp"
#include "model/config_error.hpp"
#include "model/page_layout.hpp"
#include "model/page_space.hpp"

namespace kvtier {
namespace {

std::vector<PageId> pages_of(const PageSpace& s, RequestId id) {
  auto sp = s.pages(id);
  return {sp.begin(), sp.end()};
}

TEST(PageSpace, AllocatesLowestFreePagesAsContextsGrow) {
  PageSpace s(10);
  s.open(1);
  s.grow(1, 65, 64);  // 2 pages
  s.open(2);
  s.grow(2, 1, 64);
  s.grow(1, 128, 64);  // still 2 pages
  s.grow(1, 129, 64);  // a third
  EXPECT_EQ(pages_of(s, 1), (std::vector<PageId>{0, 1, 3}));
  EXPECT_EQ(pages_of(s, 2), (std::vector<PageId>{2}));
  EXPECT_EQ(s.free_pages(), 6);
}

TEST(PageSpace, SharedPrefixIsReferenceCounted) {
  PageSpace s(8);
  s.open(1);
  s.grow(1, 256, 64);  // pages 0..3
  const std::vector<PageId> prefix = {0, 1};
  s.open(2, prefix);
  s.grow(2, 64 * 3, 64);  // one own page: 4
  EXPECT_EQ(pages_of(s, 2), (std::vector<PageId>{0, 1, 4}));
  // Closing the first request frees only what nobody else holds.
  EXPECT_EQ(s.close(1), (std::vector<PageId>{2, 3}));
  EXPECT_EQ(s.close(2), (std::vector<PageId>{0, 1, 4}));
  EXPECT_EQ(s.free_pages(), 8);
}

TEST(PageSpace, ExhaustionSaysWhatWasNeeded) {
  PageSpace s(4);
  s.open(7);
  s.grow(7, 64 * 3, 64);
  try {
    s.grow(7, 64 * 6, 64);
    FAIL();
  } catch (const CapacityError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("needs 3 more pages"), std::string::npos) << m;
    EXPECT_NE(m.find("1 of 4 pages are free"), std::string::npos) << m;
  }
  EXPECT_EQ(s.pages(7).size(), 3u);  // kept what it had
}

TEST(PageSpace, BadRequestsAreErrors) {
  PageSpace s(4);
  s.open(1);
  EXPECT_THROW(s.open(1), ConfigError);
  EXPECT_THROW(s.grow(2, 10, 64), ConfigError);
  const std::vector<PageId> bogus = {3};
  EXPECT_THROW(s.open(2, bogus), ConfigError);  // page 3 is held by nobody
  EXPECT_THROW(s.close(9), ConfigError);
}

TEST(PageSpace, DummyIdsSitPastTheEnd) {
  EXPECT_EQ(dummy_page(100), 100);
  EXPECT_EQ(dummy_slot(7), 7);
  // 2^31 - 1 pages of a 1.5 MiB page: the product must not wrap.
  EXPECT_EQ(page_offset(2147483647, 1572864), 2147483647LL * 1572864LL);
}

TEST(PageLayout, Bf16AndFp8Banks) {
  const PageLayout b = PageLayout::make(12, 64, 2, 256, false);
  EXPECT_EQ(b.banks(), 24);
  EXPECT_EQ(b.token_bytes(BankKind::k), 1024);
  EXPECT_EQ(b.layer_page_bytes(), 2048 * 64);
  const PageLayout f = PageLayout::make(12, 64, 2, 256, true);
  EXPECT_EQ(f.banks(), 48);
  EXPECT_EQ(f.token_bytes(BankKind::v), 512);
  EXPECT_EQ(f.token_bytes(BankKind::k_scale), 8);
  EXPECT_EQ(f.layer_page_bytes(), 1040 * 64);  // codes and scales travel together
  EXPECT_EQ(f.offset(BankKind::k, 3000000000LL, 5), 3000000000LL * 512 * 64 + 5 * 512);
}

}  // namespace
}  // namespace kvtier
