#include "sim/recommend.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <limits>

#include "model/memory_budget.hpp"
#include "sim/planner.hpp"

namespace kvtier::sim {

std::string_view to_string(Objective o) {
  switch (o) {
    case Objective::decode:
      return "decode";
    case Objective::prefill:
      return "prefill";
    case Objective::tpot:
      return "tpot";
  }
  return "?";
}

double tpot_ms(const PointSummary& p) {
  return p.tpot_p95_us > 0 ? p.tpot_p95_us / 1e3 : p.decode_step_ms;
}

namespace {

std::string with_commas(long long v) {
  std::string d = std::to_string(v < 0 ? -v : v);
  for (int i = static_cast<int>(d.size()) - 3; i > 0; i -= 3)
    d.insert(static_cast<std::size_t>(i), ",");
  return (v < 0 ? "-" : "") + d;
}

std::string gib(std::int64_t bytes) {
  return gib_text(bytes, 1);
}

std::string tps(double v) {
  if (v >= 100) return with_commas(std::llround(v));
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string ms(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v >= 10 ? "%.1f ms" : "%.2f ms", v);
  return b;
}

std::string pct(double fraction) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f %%", fraction * 100);
  return b;
}

ConfigFigures figures(const PointSummary& p, Placement placement, ResidencyUnit unit = {},
                      std::int64_t slots = 0) {
  ConfigFigures c;
  c.placement = placement;
  c.unit = unit;
  c.slots = slots;
  c.decode_tps = p.decode_tps;
  c.prefill_tps = p.prefill_tps;
  c.tpot_ms = tpot_ms(p);
  c.device_bytes = p.device_bytes;
  c.host_bytes = p.host_bytes;
  c.drops = p.drops;
  return c;
}

// The objective's figure: tokens/s, higher is better (a TPOT target ranks by decode speed
// among the configurations that meet it).
double figure_of(const ConfigFigures& c, const ObjectiveSpec& o) {
  return o.kind == Objective::prefill ? c.prefill_tps : c.decode_tps;
}

const char* figure_name(const ObjectiveSpec& o) {
  return o.kind == Objective::prefill ? "prefill tokens/s" : "decode tokens/s";
}

bool meets(const ConfigFigures& c, const ObjectiveSpec& o) {
  return o.kind != Objective::tpot || (c.tpot_ms > 0 && c.tpot_ms <= o.tpot_target_ms);
}

// The kinds of configuration the alternatives are one each of.
int kind_of(const ConfigFigures& c) {
  if (c.placement != Placement::mirror) return static_cast<int>(c.placement);
  return 3 + static_cast<int>(c.unit);
}

class Decision {
 public:
  explicit Decision(const RecommendInput& in) : in_(in) {
    r_.objective = in.objective;
    if (in.device) all_.push_back(figures(*in.device, Placement::device));
    if (in.host) all_.push_back(figures(*in.host, Placement::host));
    for (const UnitSweep& us : in.units)
      for (std::size_t i = 0; i < us.sizes.size(); ++i)
        all_.push_back(figures(us.points[i], Placement::mirror, us.unit, us.sizes[i]));
    if (in.ideal) {
      r_.has_ideal = true;
      r_.ideal = figures(*in.ideal, Placement::device);
      r_.ideal_fits = fits(r_.ideal);
    }
  }

  Recommendation run() {
    rank();
    mirror_sizes();
    if (r_.found) {
      explain_found();
    } else {
      explain_missing();
    }
    return std::move(r_);
  }

 private:
  bool fits_device(const ConfigFigures& c) const {
    return in_.budget.kv_bytes <= 0 || c.device_bytes <= in_.budget.kv_bytes;
  }
  bool fits_host(const ConfigFigures& c) const {
    return in_.host_capacity_bytes <= 0 || c.host_bytes <= in_.host_capacity_bytes;
  }
  bool fits(const ConfigFigures& c) const { return fits_device(c) && fits_host(c); }

  // Best first: by the objective (a TPOT target: those that meet it first, fastest decode
  // first; then the quickest steps), ties to the least device memory, then a fixed order.
  bool better(const ConfigFigures& a, const ConfigFigures& b) const {
    const ObjectiveSpec& o = in_.objective;
    const bool ma = meets(a, o), mb = meets(b, o);
    if (ma != mb) return ma;
    if (o.kind == Objective::tpot && !ma && a.tpot_ms != b.tpot_ms) {
      const double ta = a.tpot_ms > 0 ? a.tpot_ms : std::numeric_limits<double>::infinity();
      const double tb = b.tpot_ms > 0 ? b.tpot_ms : std::numeric_limits<double>::infinity();
      if (ta != tb) return ta < tb;
    }
    const double fa = figure_of(a, o), fb = figure_of(b, o);
    if (fa != fb) return fa > fb;
    if (a.device_bytes != b.device_bytes) return a.device_bytes < b.device_bytes;
    if (kind_of(a) != kind_of(b)) return kind_of(a) < kind_of(b);
    return a.slots < b.slots;
  }

  void rank() {
    for (const ConfigFigures& c : all_)
      if (c.drops == 0 && fits(c)) r_.ranked.push_back(c);
    std::stable_sort(
        r_.ranked.begin(), r_.ranked.end(),
        [this](const ConfigFigures& a, const ConfigFigures& b) { return better(a, b); });
    std::vector<bool> seen(5, false);
    for (const ConfigFigures& c : r_.ranked) {
      if (seen[static_cast<std::size_t>(kind_of(c))]) continue;
      seen[static_cast<std::size_t>(kind_of(c))] = true;
      r_.alternatives.push_back(c);
    }
    if (r_.ranked.empty()) return;
    r_.found = true;
    r_.chosen = r_.ranked.front();
    r_.meets_target = meets(r_.chosen, in_.objective);
    r_.figure = figure_of(r_.chosen, in_.objective);
    if (r_.alternatives.size() > 1) {
      const double ru = figure_of(r_.alternatives[1], in_.objective);
      r_.runner_up_ratio = ru > 0 ? r_.figure / ru : 0;
    }
    if (r_.has_ideal) {
      const double ideal = figure_of(r_.ideal, in_.objective);
      r_.vs_ideal = ideal > 0 ? r_.figure / ideal : 0;
    }
  }

  // Per unit, the smallest size that fits, drops nothing (and meets a TPOT target) and comes
  // within the fraction of the recommendation's figure.
  void mirror_sizes() {
    r_.within_reference = r_.found ? r_.figure : 0;
    for (const UnitSweep& us : in_.units) {
      MirrorSizes m;
      m.unit = us.unit;
      for (std::size_t i = 0; r_.found && i < us.sizes.size(); ++i) {
        const ConfigFigures c = figures(us.points[i], Placement::mirror, us.unit, us.sizes[i]);
        if (c.drops != 0 || !fits(c) || !meets(c, in_.objective)) continue;
        const double f = figure_of(c, in_.objective);
        if (m.within_slots == 0 && f >= r_.within_reference * (1 - in_.within)) {
          m.within_slots = c.slots;
          m.within_device_bytes = c.device_bytes;
        }
        if (m.chosen_slots == 0 && f >= r_.within_reference * (1 - in_.chosen)) {
          m.chosen_slots = c.slots;
        }
      }
      r_.mirror.push_back(m);
    }
  }

  std::string budget_text() const {
    return in_.budget.kv_bytes > 0 ? gib(in_.budget.kv_bytes) + " KV budget" : "unchecked budget";
  }

  // Why the kinds that are not among the alternatives are out.
  std::string exclusions() {
    std::vector<std::string> out;
    auto over = [&](const ConfigFigures& c, const char* code) {
      r_.reasons.push_back(code);
      if (!fits_device(c)) return "needs " + gib(c.device_bytes) + " of device memory";
      return "needs " + gib(c.host_bytes) + " of host RAM, the host has " +
             gib(in_.host_capacity_bytes);
    };
    if (in_.device && !fits(figures(*in_.device, Placement::device))) {
      out.push_back("device " +
                    over(figures(*in_.device, Placement::device), "device_over_budget"));
    }
    if (in_.host && !fits(figures(*in_.host, Placement::host))) {
      out.push_back("host " + over(figures(*in_.host, Placement::host), "host_over_budget"));
    }
    for (const UnitSweep& us : in_.units) {
      bool fitting = false, dropping_only = true;
      std::int64_t least = 0;
      for (std::size_t i = 0; i < us.sizes.size(); ++i) {
        const ConfigFigures c = figures(us.points[i], Placement::mirror, us.unit, us.sizes[i]);
        if (c.drops != 0) continue;
        dropping_only = false;
        if (fits(c)) fitting = true;
        if (least == 0 || c.device_bytes < least) least = c.device_bytes;
      }
      const std::string name = "mirror (" + std::string(to_string(us.unit)) + " unit)";
      if (dropping_only) {
        r_.reasons.push_back("mirror_drops");
        out.push_back(name + ": every pool swept drops selected pages");
      } else if (!fitting) {
        r_.reasons.push_back("mirror_over_budget");
        out.push_back(name + ": the smallest pool that drops nothing needs " + gib(least));
      }
    }
    std::string s;
    for (std::size_t i = 0; i < out.size(); ++i)
      s += (i ? "; " : "") + out[i];
    return s;
  }

  // The configurations the recommendation was chosen among: those that fit and drop nothing
  // (and meet the TPOT target).
  std::size_t qualifying() const {
    return static_cast<std::size_t>(
        std::count_if(r_.ranked.begin(), r_.ranked.end(),
                      [this](const ConfigFigures& c) { return meets(c, in_.objective); }));
  }

  // One sentence each: the choice, the runner-up, what is out of the budget, the ideal, the
  // within size.
  void explain_found() {
    const ObjectiveSpec& o = in_.objective;
    const ConfigFigures& c = r_.chosen;
    const bool tpot = o.kind == Objective::tpot;
    const std::string target = "the TPOT target of " + (tpot ? ms(o.tpot_target_ms) : "");
    std::string s = describe(c) + ": " + tps(r_.figure) + " " + figure_name(o);
    if (tpot) s += ", " + ms(c.tpot_ms) + " per token (the mean wait for a decode token)";
    s += " in " + gib(c.device_bytes) + " of the " + budget_text();
    if (tpot && !r_.meets_target) {
      r_.reasons.push_back("tpot_unmet");
      s = "No configuration that fits and drops nothing meets " + target + "; the quickest is " + s;
    } else if (qualifying() == 1) {
      r_.reasons.push_back("only_fitting");
      s += ", the only configuration that fits" +
           (tpot ? ", drops nothing and meets " + target : std::string(" and drops nothing"));
    } else {
      r_.reasons.push_back("best_of_fitting");
      s += std::string(", the ") + (tpot ? "fastest decode" : "best") + " of " +
           std::to_string(qualifying()) + " configurations that fit" +
           (tpot ? ", drop nothing and meet " + target : std::string(" and drop nothing"));
    }
    if (tpot && r_.meets_target) r_.reasons.push_back("tpot_met");
    s += ".";
    if (r_.alternatives.size() > 1) {
      const ConfigFigures& ru = r_.alternatives[1];
      s += " Runner-up: " + describe(ru) + ", " + tps(figure_of(ru, o)) + " " + figure_name(o);
      if (r_.runner_up_ratio >= 1.995) {
        char b[32];
        std::snprintf(b, sizeof b, " (%.2f x slower)", r_.runner_up_ratio);
        s += b;
      } else if (r_.runner_up_ratio > 0) {
        s += " (" + pct(1 - 1 / r_.runner_up_ratio) + " slower)";
      }
      s += ".";
    }
    const std::string excluded = exclusions();
    if (!excluded.empty()) s += " Out of the budget: " + excluded + ".";
    if (r_.has_ideal) {
      if (c.placement == Placement::device) {
        r_.reasons.push_back("ideal_fits");
        s += " It is the ideal: every page in GPU memory.";
      } else {
        r_.reasons.push_back(r_.ideal_fits ? "ideal_fits" : "ideal_over_budget");
        s += " " + pct(r_.vs_ideal) +
             " of the ideal (device with unlimited memory: " + tps(figure_of(r_.ideal, o)) +
             " in " + gib(r_.ideal.device_bytes) + (r_.ideal_fits ? ")." : ", over the budget).");
      }
    }
    r_.sentence = s + " " + within_text() + ".";
  }

  // The smallest pool within the fraction of the recommendation: at the chosen unit when a
  // mirror is recommended, else the least memory over the units.
  std::string within_text() const {
    const std::string frac = pct(in_.within);
    const bool mirror_chosen = r_.chosen.placement == Placement::mirror;
    const MirrorSizes* best = nullptr;
    for (const MirrorSizes& m : r_.mirror) {
      if (m.within_slots == 0 || (mirror_chosen && m.unit != r_.chosen.unit)) continue;
      if (!best || m.within_device_bytes < best->within_device_bytes) best = &m;
    }
    if (r_.mirror.empty()) return "No mirror pool was swept";
    if (!best) return "No mirror pool swept that fits comes within " + frac + " of it";
    if (mirror_chosen && best->within_slots == r_.chosen.slots)
      return "No smaller pool swept comes within " + frac + " of it";
    return "The smallest mirror pool within " + frac +
           " of it: " + std::string(to_string(best->unit)) + " unit, " +
           with_commas(best->within_slots) + " slots (" + gib(best->within_device_bytes) + ")";
  }

  void explain_missing() {
    r_.reasons.push_back("nothing_fits");
    // The cheapest configurations that drop nothing: by device memory (within the host RAM),
    // and by host RAM (within B).
    const ConfigFigures* by_device = nullptr;
    const ConfigFigures* by_host = nullptr;
    for (const ConfigFigures& c : all_) {
      if (c.drops != 0) continue;
      if (fits_host(c) && (!by_device || c.device_bytes < by_device->device_bytes)) by_device = &c;
      if (fits_device(c) && (!by_host || c.host_bytes < by_host->host_bytes)) by_host = &c;
    }
    std::string s = "Nothing fits the " + budget_text() + " without dropping selected pages";
    if (by_device) {
      r_.cheapest = *by_device;
      r_.smallest_budget_bytes = by_device->device_bytes;
      s += ": the cheapest configuration that drops nothing is " + describe(*by_device) +
           ", which needs " + gib(by_device->device_bytes) + " of device memory (--device-kv-gib " +
           budget_option_value(by_device->device_bytes) + " or more)";
      if (by_device->host_bytes > 0) s += " and " + gib(by_device->host_bytes) + " of host RAM";
      if (in_.budget.card_bytes > 0 && by_device->device_bytes > in_.budget.card_bytes) {
        r_.reasons.push_back("beyond_card");
        s += ", more than the card's " + gib(in_.budget.card_bytes);
      }
    }
    if (by_host) {
      r_.reasons.push_back("host_ram_short");
      r_.host_ram_needed_bytes = by_host->host_bytes;
      s += std::string(by_device ? "; " : ": ") + "within the budget, " + describe(*by_host) +
           " needs " + gib(by_host->host_bytes) + " of host RAM, the host has " +
           gib(in_.host_capacity_bytes);
    }
    if (!by_device && !by_host) {
      r_.reasons.push_back("all_drop");
      s += ": every configuration swept drops selected pages (sweep larger pools with --sizes)";
    }
    if (r_.has_ideal) s += "; the ideal, device, needs " + gib(r_.ideal.device_bytes);
    r_.sentence = s + ".";
  }

  const RecommendInput& in_;
  std::vector<ConfigFigures> all_;
  Recommendation r_;
};

boost::json::value config_json(const ConfigFigures& c) {
  const bool mirror = c.placement == Placement::mirror;
  return boost::json::object{
      {"placement", std::string(to_string(c.placement))},
      {"unit", mirror ? boost::json::value(std::string(to_string(c.unit))) : nullptr},
      {"slots", mirror ? boost::json::value(c.slots) : nullptr},
      {"decode_tokens_per_s", c.decode_tps},
      {"prefill_tokens_per_s", c.prefill_tps},
      {"tpot_ms", c.tpot_ms},
      {"device_bytes", c.device_bytes},
      {"host_bytes", c.host_bytes}};
}

}  // namespace

std::string describe(const ConfigFigures& c) {
  switch (c.placement) {
    case Placement::device:
      return "device";
    case Placement::host:
      return "host (in place)";
    case Placement::mirror:
      break;
  }
  return "mirror, " + std::string(to_string(c.unit)) + " unit, " + with_commas(c.slots) + " slots";
}

Recommendation recommend(const RecommendInput& in) {
  return Decision(in).run();
}

boost::json::object to_json(const Recommendation& r) {
  namespace json = boost::json;
  auto list = [](const std::vector<ConfigFigures>& v) {
    json::array a;
    for (const ConfigFigures& c : v)
      a.push_back(config_json(c));
    return a;
  };
  json::array mirror, reasons;
  for (const MirrorSizes& m : r.mirror) {
    mirror.push_back({{"unit", std::string(to_string(m.unit))},
                      {"within_slots", m.within_slots},
                      {"within_device_bytes", m.within_device_bytes},
                      {"chosen_slots", m.chosen_slots}});
  }
  for (const std::string& c : r.reasons)
    reasons.push_back(json::string(c));
  json::object o{
      {"objective", std::string(to_string(r.objective.kind))},
      {"tpot_target_ms", r.objective.kind == Objective::tpot
                             ? json::value(r.objective.tpot_target_ms)
                             : json::value(nullptr)},
      {"found", r.found},
      {"meets_target", r.meets_target},
      {"chosen", r.found ? config_json(r.chosen) : json::value(nullptr)},
      {"figure", r.figure},
      {"runner_up", r.alternatives.size() > 1 ? config_json(r.alternatives[1]) : nullptr},
      {"runner_up_ratio", r.runner_up_ratio},
      {"ideal", r.has_ideal ? config_json(r.ideal) : json::value(nullptr)},
      {"ideal_fits", r.ideal_fits},
      {"vs_ideal", r.vs_ideal},
      {"within_reference", "recommended"},
      {"within_reference_figure", r.within_reference},
      {"mirror_sizes", std::move(mirror)},
      {"alternatives", list(r.alternatives)},
      {"ranked", list(r.ranked)},
      {"smallest_budget_bytes", r.smallest_budget_bytes},
      {"cheapest", r.smallest_budget_bytes > 0 ? config_json(r.cheapest) : json::value(nullptr)},
      {"host_ram_needed_bytes", r.host_ram_needed_bytes},
      {"reasons", std::move(reasons)},
      {"sentence", r.sentence}};
  return o;
}

}  // namespace kvtier::sim
