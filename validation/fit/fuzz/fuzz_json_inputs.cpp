// libFuzzer target: any byte string read as each of kvtier's JSON inputs -- a geometry, a
// hardware profile (complete, or written over a base), a calibration points file -- must
// either be read or end in a ConfigError; what is read must write back and read again as the
// same thing (numbers to 15 significant digits: Boost.JSON 1.81 parses no closer), and a
// profile that passes its checks must price ops without a sanitizer report (an op past what
// the simulator times ends in a ConfigError too). Anything else (a crash, another exception,
// a hang, an allocation past -rss_limit_mb) is a bug.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "model/config_error.hpp"
#include "model/cost_model.hpp"
#include "model/geometry.hpp"
#include "model/hardware_profile.hpp"
#include "model/profile_override.hpp"
#include "validation/fit/points_file.hpp"

namespace {

using kvtier::ConfigError;

// A profile that passed validate(): a few ops at small and huge sizes.
void price(const kvtier::HardwareProfile& p) {
  const kvtier::CostModel c(p);
  for (const std::int64_t n : {std::int64_t{0}, std::int64_t{1} << 20, std::int64_t{1} << 40}) {
    try {
      (void)c.in_place_read_ns(n);
      (void)c.h2d_copy_ns(n, 1 + n / 4096);
      (void)c.staging_ns(n, 1 + n / (1 << 20));
      (void)c.projection_ns(n, 64);
      (void)c.ensure_ns(n / 64, 1 << 20, n / 4096);
      (void)c.attention_fp8_host_ns(n, 8);
      (void)c.non_qsa_ns(n / 1024);
    } catch (const ConfigError&) {  // past 2^62 ns: refused, as it should be
    }
  }
}

// Equal to 15 significant digits.
bool close(double a, double b) {
  return a == b || std::fabs(a - b) <= 1e-14 * std::max(std::fabs(a), std::fabs(b));
}

bool same(const kvtier::fit::PointsFile& a, const kvtier::fit::PointsFile& b) {
  if (a.card != b.card || a.driver != b.driver || a.date != b.date || a.command != b.command ||
      a.series.size() != b.series.size())
    return false;
  for (std::size_t s = 0; s < a.series.size(); ++s) {
    const kvtier::fit::Samples &x = a.series[s].samples, &y = b.series[s].samples;
    if (a.series[s].term != b.series[s].term || x.inputs != y.inputs || x.y.size() != y.y.size() ||
        x.x.size() != y.x.size())
      return false;
    for (std::size_t i = 0; i < x.y.size(); ++i)
      if (!close(x.y[i], y.y[i])) return false;
    for (std::size_t i = 0; i < x.x.size(); ++i) {
      if (x.x[i].size() != y.x[i].size()) return false;
      for (std::size_t j = 0; j < x.x[i].size(); ++j)
        if (!close(x.x[i][j], y.x[i][j])) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const kvtier::Geometry g = kvtier::geometry_from_json(text);
    g.validate();
    const kvtier::Geometry back = kvtier::geometry_from_json(kvtier::geometry_to_json(g));
    back.validate();  // what is written reads and passes its checks again
    if (back.qsa_layer_ids != g.qsa_layer_ids || back.page_size != g.page_size ||
        back.head_dim != g.head_dim || !close(back.rope_theta, g.rope_theta) ||
        !close(back.yarn_factor, g.yarn_factor))
      __builtin_trap();  // a geometry that does not read back as written
  } catch (const ConfigError&) {
  }
  try {
    if (kvtier::profile_override_base(text)) {
      kvtier::HardwareProfile base;  // every figure 0: the override must set what it prices
      base.name = "base";
      const kvtier::HardwareProfile p = kvtier::apply_profile_override(base, text);
      p.validate();
      price(p);
    } else {
      const kvtier::HardwareProfile p = kvtier::hardware_profile_from_json(text);
      p.validate();
      price(p);
    }
  } catch (const ConfigError&) {
  }
  try {
    const kvtier::fit::PointsFile pf = kvtier::fit::read_points(text);
    if (!same(kvtier::fit::read_points(kvtier::fit::write_points(pf)), pf))
      __builtin_trap();  // a points file that does not read back as written
  } catch (const ConfigError&) {
  }
  return 0;
}
