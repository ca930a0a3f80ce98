// The CLI's helpers on their own (cli/options, cli/progress): how counts, lists and remaining
// times are read and written.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "model/config_error.hpp"

namespace kvtier::cli {
namespace {

TEST(CliSupport, EtaReadsAsPeopleSayIt) {
  EXPECT_EQ(eta_text(0), "0 s");
  EXPECT_EQ(eta_text(44.6), "45 s");
  EXPECT_EQ(eta_text(99), "99 s");
  EXPECT_EQ(eta_text(100), "2 min");
  EXPECT_EQ(eta_text(725), "12 min");
  EXPECT_EQ(eta_text(6000), "1.7 h");
  EXPECT_EQ(eta_text(23400), "6.5 h");
  EXPECT_EQ(eta_text(23508348), "272 d");  // 99,999,999 requests of `trace gen`
  EXPECT_EQ(eta_text(-1), "-");            // no rate yet
  EXPECT_EQ(eta_text(std::numeric_limits<double>::quiet_NaN()), "-");
  EXPECT_EQ(eta_text(std::numeric_limits<double>::infinity()), "-");
}

TEST(CliSupport, CountOrAuto) {
  EXPECT_FALSE(parse_count_or_auto("auto", "--micro-batches", 64).has_value());
  EXPECT_EQ(parse_count_or_auto("4", "--micro-batches", 64), 4);
  EXPECT_EQ(parse_count_or_auto("64", "--micro-batches", 64), 64);
  for (const char* bad : {"0", "65", "-1", "2x", "", "4.0", "4,8", "99999999999999999999"}) {
    try {
      (void)parse_count_or_auto(bad, "--micro-batches", 64);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--micro-batches: auto or one count 1..64, got '") + bad + "'");
    }
  }
}

TEST(CliSupport, PositiveLists) {
  EXPECT_EQ(parse_positive_list("4096,16384", "--sizes", "integers"),
            (std::vector<std::int64_t>{4096, 16384}));
  EXPECT_TRUE(parse_positive_list("", "--sizes", "integers").empty());
  EXPECT_THROW((void)parse_positive_list("4096,0", "--sizes", "integers"), ConfigError);
  EXPECT_THROW((void)parse_positive_list("4096,,8", "--sizes", "integers"), ConfigError);
  EXPECT_THROW((void)parse_positive_list("1e3", "--sizes", "integers"), ConfigError);
}

}  // namespace
}  // namespace kvtier::cli
