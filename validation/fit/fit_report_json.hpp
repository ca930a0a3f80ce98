#pragma once
// `kvtier validate fit --json`: the fit's report for machines, every series with its fit's
// coefficients and quality and the profile fields it set (the same figures as the table).
#include <boost/json/object.hpp>

#include "validation/fit/profile_fit.hpp"

namespace kvtier::fit {

boost::json::object fit_report_to_json(const FitReport& r);

}  // namespace kvtier::fit
