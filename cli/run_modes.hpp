#pragma once
// The two modes of `kvtier run` (cli/cmd_run.cpp picks one from the arguments): a selection
// trace replayed on the GPU (run_trace.cpp) and the QSA model run from weights
// (run_model.cpp); and the GPU calibration that `kvtier validate` runs. Same contract as a
// Command's run function.
#include <string>
#include <vector>

namespace kvtier::cli {

int run_trace(const std::vector<std::string>& args);
int run_model(const std::vector<std::string>& args);
// `kvtier validate calibrate` (validate_calibrate.cpp): the GPU calibration's points file.
int validate_calibrate(const std::vector<std::string>& args);

}  // namespace kvtier::cli
