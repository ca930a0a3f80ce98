// Profiles users write over a base (model/profile_override.hpp through sim::load_profile):
// the values and sources that result, what becomes of the base's validation, bases that are
// files (relative paths, cycles, depth), and every malformed file refused with its path and
// the field at fault.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "model/config_error.hpp"
#include "model/profile_override.hpp"
#include "model/profile_trust.hpp"
#include "sim/profiles.hpp"
#include "tests/error_of.hpp"

namespace kvtier {
namespace {

using testing::error_of;

// `text` written to a file of this test's own under the test temp dir; returns its path.
std::string write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/profile-override-" + name;
  std::ofstream(path) << text;
  return path;
}

std::string over(const std::string& base, const std::string& params,
                 const std::string& name = "my-card") {
  return R"({"name": ")" + name + R"(", "base": ")" + base + R"(", "params": {)" + params + "}}";
}

std::string load_error(const std::string& file_name, const std::string& text) {
  const std::string path = write(file_name, text);
  return error_of<ConfigError>([&] { sim::load_profile(path); });
}

TEST(ProfileOverride, ChangedFieldsCarryTheirSourcesTheRestIsTheBase) {
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  const HardwareProfile p = sim::load_profile(write(
      "round-trip.json", over("h200-pcie5",
                              R"("pcie_h2d_gbps": {"value": 47.5, "source": "measured on gpu-17"},
                    "non_qsa_token_us": {"value": 0, "source": "estimate: QSA stack alone"})")));
  EXPECT_EQ(p.name, "my-card (over h200-pcie5)");
  EXPECT_EQ(p.description, base.description);  // none given
  EXPECT_EQ(p.pcie_h2d_gbps, 47.5);
  EXPECT_EQ(p.source("pcie_h2d_gbps"), "measured on gpu-17");
  EXPECT_EQ(p.non_qsa_token_us, 0);
  EXPECT_EQ(p.source("non_qsa_token_us"), "estimate: QSA stack alone");
  for (std::string_view f : hardware_profile_params()) {
    if (f == "pcie_h2d_gbps" || f == "non_qsa_token_us") continue;
    EXPECT_EQ(p.param(f), base.param(f)) << f;
    EXPECT_EQ(p.source(f), base.source(f)) << f;
  }
  ASSERT_TRUE(p.derived_from);
  EXPECT_EQ(p.derived_from->base, "h200-pcie5");
  EXPECT_EQ(p.derived_from->changed,
            (std::vector<std::string>{"pcie_h2d_gbps", "non_qsa_token_us"}));
  // Written out it is a complete profile with the same values and sources.
  const HardwareProfile back = hardware_profile_from_json(hardware_profile_to_json(p));
  for (std::string_view f : hardware_profile_params()) {
    EXPECT_EQ(back.param(f), p.param(f)) << f;
    EXPECT_EQ(back.source(f), p.source(f)) << f;
  }
}

TEST(ProfileOverride, TheWorkedExampleOfTheDocs) {
  const char* dir = std::getenv("KVTIER_DOCS_EXAMPLES");
  ASSERT_NE(dir, nullptr) << "KVTIER_DOCS_EXAMPLES is set by tests/model/CMakeLists.txt";
  const HardwareProfile p = sim::load_profile(std::string(dir) + "/h200-our-host.json");
  EXPECT_EQ(p.name, "h200-our-host (over h200-pcie5)");
  EXPECT_EQ(p.device_memory_gib, 115);
  EXPECT_EQ(p.pcie_h2d_gbps, 47.5);
  EXPECT_EQ(p.zero_copy_read_gbps, 44.2);
  EXPECT_NE(p.source("pcie_h2d_gbps").find("measured"), std::string::npos);
  EXPECT_FALSE(p.validation);
  EXPECT_EQ(trust_line(p),
            "not validated: pcie_h2d_gbps, zero_copy_read_gbps changed over h200-pcie5, whose "
            "validation does not carry over");
}

TEST(ProfileOverride, AnyChangedCostFieldVoidsTheBasesValidation) {
  // One calibrated cost field is enough, even given at the base's own value: the file says
  // the figure is its own, and the validation was measured with the base's.
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  const std::string same = std::to_string(base.hbm_gbps);
  const HardwareProfile p = sim::load_profile(
      write("void.json", over("h200-pcie5",
                              R"("device_memory_gib": {"value": 96, "source": "ours"},
              "hbm_gbps": {"value": )" +
                                  same + R"(, "source": "restated"})")));
  EXPECT_FALSE(p.validation);
  EXPECT_EQ(p.derived_from->voided_validation, std::vector<std::string>{"hbm_gbps"});
  const std::string line = trust_line(p);
  EXPECT_EQ(line,
            "not validated: hbm_gbps changed over h200-pcie5, whose validation does not carry "
            "over");
  EXPECT_EQ(line.find("validated on"), std::string::npos);
  // Every priced QSA term counts; capacity and the rest of the model do not.
  for (std::string_view f : hardware_profile_params()) {
    const bool outside =
        f == "device_memory_gib" || f == "non_qsa_forward_us" || f == "non_qsa_token_us";
    EXPECT_EQ(validation_covers(f), !outside) << f;
  }
}

TEST(ProfileOverride, OnlyDeviceMemoryOrTheRestOfTheModelKeepsIt) {
  const HardwareProfile base = sim::load_profile("h200-pcie5");
  const HardwareProfile mem = sim::load_profile(write(
      "keep-mem.json",
      over("h200-pcie5", R"("device_memory_gib": {"value": 96, "source": "weights take 35"})")));
  ASSERT_TRUE(mem.validation);
  EXPECT_EQ(mem.validation->date, base.validation->date);
  EXPECT_TRUE(mem.derived_from->voided_validation.empty());
  EXPECT_EQ(trust_line(mem), trust_line(base) +
                                 " (as h200-pcie5; changed here, outside what the validation "
                                 "covers: device_memory_gib)");
  const HardwareProfile rest = sim::load_profile(write(
      "keep-rest.json",
      over("h200-pcie5", R"("non_qsa_forward_us": {"value": 900, "source": "engine trace"})")));
  ASSERT_TRUE(rest.validation);
  EXPECT_EQ(trust_line(rest).rfind("validated on NVIDIA H200", 0), 0u) << trust_line(rest);
}

TEST(ProfileOverride, AScaledBaseStaysScaled) {
  const HardwareProfile p = sim::load_profile(write(
      "scaled.json", over("l40s-pcie4", R"("pcie_h2d_gbps": {"value": 25, "source": "ours"})")));
  EXPECT_TRUE(p.scaled_from_datasheets);
  EXPECT_EQ(trust_line(p), "scaled from datasheets, not validated");
}

TEST(ProfileOverride, ABaseThatIsAFileRelativeToTheFileNamingIt) {
  const std::string team =
      write("team.json",
            over("h200-pcie5", R"("pcie_h2d_gbps": {"value": 50, "source": "team"})", "team"));
  ASSERT_EQ(team.substr(team.rfind('/') + 1), "profile-override-team.json");
  const HardwareProfile p = sim::load_profile(
      write("mine.json", over("profile-override-team.json",
                              R"("launch_us": {"value": 5, "source": "mine"})", "mine")));
  EXPECT_EQ(p.name, "mine (over team (over h200-pcie5))");
  EXPECT_EQ(p.pcie_h2d_gbps, 50);
  EXPECT_EQ(p.source("pcie_h2d_gbps"), "team");
  EXPECT_EQ(p.launch_us, 5);
  EXPECT_EQ(trust_line(p), "not validated");  // team's own file dropped it already
}

TEST(ProfileOverride, CyclesAndDeepChainsAreRefused) {
  write("cycle-a.json", over("profile-override-cycle-b.json", "", "a"));
  const std::string msg =
      load_error("cycle-b.json", over("profile-override-cycle-a.json", "", "b"));
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("profile-override-cycle-a.json"), std::string::npos) << msg;
  const std::string self = load_error("self.json", over("profile-override-self.json", "", "s"));
  EXPECT_NE(self.find("cycle"), std::string::npos) << self;

  // A chain exactly at the limit loads; one more file is refused.
  std::string base = "h200-pcie5";
  std::string top;
  for (int i = 0; i < sim::kMaxProfileBaseDepth; ++i) {
    top = write("deep-" + std::to_string(i) + ".json", over(base, "", "d" + std::to_string(i)));
    base = top.substr(top.rfind('/') + 1);
  }
  EXPECT_NO_THROW(sim::load_profile(top));
  const std::string deep = load_error("deep-over.json", over(base, "", "over"));
  EXPECT_NE(deep.find("more than " + std::to_string(sim::kMaxProfileBaseDepth)), std::string::npos)
      << deep;
}

struct Bad {
  const char* file;
  std::string text;
  std::vector<std::string> says;  // each must appear in the message
};

TEST(ProfileOverride, BadFilesNameTheFileAndTheField) {
  const std::string good = R"({"value": 50, "source": "s"})";
  const std::vector<Bad> cases = {
      {"no-base.json",
       R"({"name": "x", "params": {"pcie_h2d_gbps": )" + good + "}}",
       {"x.device_memory_gib", "missing", "\"base\""}},
      {"unknown-base.json", over("h900", ""), {"base", "unknown hardware profile 'h900'"}},
      {"missing-base-file.json", over("nope.json", ""), {"base", "cannot read", "nope.json"}},
      {"base-type.json", R"({"name": "x", "base": 3, "params": {}})", {"base", "string"}},
      {"unknown-key.json",
       R"({"name": "x", "base": "h200-pcie5", "params": {}, "fast": 1})",
       {"fast", "unknown field"}},
      {"unknown-param.json", over("h200-pcie5", R"("hbm": )" + good), {"params.hbm", "unknown"}},
      {"value-type.json",
       over("h200-pcie5", R"("hbm_gbps": {"value": "3000", "source": "s"})"),
       {"params.hbm_gbps.value", "expected a number"}},
      {"entry-type.json",
       over("h200-pcie5", R"("hbm_gbps": 3000)"),
       {"params.hbm_gbps", "\"value\""}},
      {"no-value.json",
       over("h200-pcie5", R"("hbm_gbps": {"source": "s"})"),
       {"params.hbm_gbps", "missing \"value\""}},
      {"no-source.json",
       over("h200-pcie5", R"("hbm_gbps": {"value": 3000})"),
       {"params.hbm_gbps", "missing \"source\""}},
      {"empty-source.json",
       over("h200-pcie5", R"("hbm_gbps": {"value": 3000, "source": ""})"),
       {"params.hbm_gbps.source", "non-empty"}},
      {"extra-key.json",
       over("h200-pcie5", R"("hbm_gbps": {"value": 3000, "source": "s", "unit": "GB/s"})"),
       {"params.hbm_gbps.unit", "unknown field"}},
      {"negative.json",
       over("h200-pcie5", R"("hbm_gbps": {"value": -3, "source": "s"})"),
       {"hbm_gbps", "must be positive", "-3"}},
      {"zero.json",
       over("h200-pcie5", R"("launch_us": {"value": 0, "source": "s"})"),
       {"launch_us", "must be positive"}},
      {"rest-negative.json",
       over("h200-pcie5", R"("non_qsa_forward_us": {"value": -1, "source": "s"})"),
       {"non_qsa_forward_us", "must be 0 or more"}},
      {"validation.json",
       R"({"name": "x", "base": "h200-pcie5", "params": {}, "validation": {}})",
       {"validation", "not allowed"}},
      {"scaled.json",
       R"({"name": "x", "base": "h200-pcie5", "params": {}, "scaled_from_datasheets": true})",
       {"scaled_from_datasheets", "not allowed"}},
      {"no-name.json", R"({"base": "h200-pcie5", "params": {}})", {"name", "missing"}},
      {"no-params.json", R"({"name": "x", "base": "h200-pcie5"})", {"params", "missing"}},
      {"not-json.json", R"({"name": "x", "base": )", {"not valid JSON at line 1, column 23"}},
      {"bad-line-2.json",
       "{\"name\": \"x\",\n \"base\": ,}",
       {"not valid JSON at line 2, column 10"}},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string msg = load_error(c.file, c.text);
    EXPECT_NE(msg.find(std::string("profile-override-") + c.file), std::string::npos) << msg;
    for (const std::string& s : c.says)
      EXPECT_NE(msg.find(s), std::string::npos) << "'" << s << "' not in: " << msg;
    EXPECT_EQ(msg.find("boost"), std::string::npos) << "the parser's own source named: " << msg;
  }
  // A bad base file is named too, after the file that names it.
  write("bad-base.json", over("h200-pcie5", R"("hbm_gbps": {"value": 3000})"));
  const std::string chained =
      load_error("over-bad.json", over("profile-override-bad-base.json", ""));
  EXPECT_NE(chained.find("profile-override-over-bad.json"), std::string::npos) << chained;
  EXPECT_NE(chained.find("profile-override-bad-base.json"), std::string::npos) << chained;
  EXPECT_NE(chained.find("params.hbm_gbps"), std::string::npos) << chained;
}

}  // namespace
}  // namespace kvtier
