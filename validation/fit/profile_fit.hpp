#pragma once
#include <optional>
#include <string>
#include <vector>

#include "model/hardware_profile.hpp"
#include "validation/fit/knee_fit.hpp"
#include "validation/fit/linear_fit.hpp"
#include "validation/fit/points_file.hpp"

namespace kvtier::fit {

// One profile field a series set.
struct FieldFit {
  std::string field;
  double value = 0;
  double base_value = 0;  // what the base profile had
  std::string source;
};

// A coefficient of a fit that the cost model does not take from this term (an intercept where
// the model has no fixed part, or prices it with another field): printed, never dropped
// silently.
struct UnpricedPart {
  std::string coefficient;  // "intercept" or an input's name
  double value = 0;         // us, or us per unit of the input
  std::string note;         // what the cost model does instead
};

struct SeriesFit {
  std::string term;
  std::vector<std::string> inputs;
  std::size_t points = 0;
  LinearFit linear;
  // Single-input series with at least 4 distinct x. For a two-piece term (the host bank's
  // store) the fit the profile takes; `linear` then holds its intercept, its slope past the
  // knee and its quality.
  std::optional<KneeFit> knee;
  std::vector<FieldFit> fields;
  std::vector<UnpricedPart> unpriced;
  std::vector<std::string> notes;  // e.g. the attend's fraction of the HBM gather ceiling
};

struct FitReport {
  std::string card, driver, date, command;
  std::vector<SeriesFit> series;  // in points-file order, attention_warm last (it needs the rest)
  std::vector<std::string> kept;  // terms without a series: the base values stand
  std::vector<std::string> excluded;  // series the caller left out: the base values stand
};

struct ProfileFit {
  HardwareProfile profile;
  FitReport report;
};

// Fits every series of `points` (docs/validation.md, "Series") and writes the fields each
// sets into a copy of `base`, with sources naming the command, card, driver, date, number of
// points and R². Fields of absent terms keep the base value and source. The fitted profile
// carries no validation (the base's, if any, was of other values) and is not "scaled from
// datasheets" once any series was fitted. Throws FitError for series that cannot be fitted and
// ConfigError for fits that give a non-positive value for a field (naming both).
// `exclude`: terms whose series are left out of the fit (their fields keep the base's values and
// sources, FitReport::excluded lists them), so that one series a calibration got wrong does not
// stop the others' fit; each must be a calibration term that `points` has a series of, else
// ConfigError.
ProfileFit fit_profile(const PointsFile& points, const HardwareProfile& base,
                       const std::vector<std::string>& exclude = {});

}  // namespace kvtier::fit
