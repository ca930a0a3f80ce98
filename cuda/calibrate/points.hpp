#pragma once
// What the GPU calibration measures (`kvtier validate calibrate`, issue 15) and the points file it
// writes (docs/validation.md, "The points file"). Plain C++: no CUDA, so that the file's writer is
// tested on the CPU.
#include <ctime>
#include <string>
#include <vector>

namespace kvtier::calibrate {

// One sweep of one benchmark. Several sweeps may belong to one term of the cost model (the miss
// copy and the in-place host read are both `zero_copy_read`): the points file holds one series per
// term, the sweeps' points merged. A sweep that prices nothing the cost model has (graphs against
// eager for a whole layer, the prefill shape of the index) is reported and not written to the file.
struct Series {
  std::string term;                         // docs/validation.md's term, e.g. "h2d_copy"
  std::string sweep;                        // what was timed, e.g. "miss copy, bf16 layer pages"
  std::vector<std::string> inputs;          // the term's input names, in the table's order
  std::vector<std::vector<double>> points;  // [x_1, ..., x_k, y]; y: median us of one operation
  bool in_points_file = true;               // false: reported only
  std::string timing;                       // how one point was timed
  double seconds = 0;                       // wall time the sweep took, setup included
  bool truncated = false;                   // stopped at its time budget before its last point
};

// Everything one calibration run measured, with where and how.
struct Points {
  std::string card;     // e.g. "NVIDIA H200"
  std::string driver;   // e.g. "580.65.06 / CUDA 13.0"
  std::string date;     // day of the measurement, UTC, YYYY-MM-DD
  std::string command;  // the command line that ran it
  std::vector<Series> series;
  std::vector<std::string> failures;  // groups of sweeps that threw: "group: what"; not in the file
};

// The input names docs/validation.md lists for `term`, in order; throws std::invalid_argument
// naming the term when the table has no such term.
const std::vector<std::string>& term_inputs(const std::string& term);
// Every term of the table, in the table's order.
const std::vector<std::string>& points_file_terms();

// The points file's text: card, driver, date, command and one series per term that has points
// (terms in the table's order, sweeps' points in measurement order). Throws std::invalid_argument
// naming the sweep and the point for an unknown term, input names other than the table's, a point
// of the wrong length, a negative or non-finite number, or a term with fewer than k + 2 points.
std::string points_file_json(const Points& p);
// Writes points_file_json(p) to `path` through a temporary file in the same directory, renamed
// onto `path` once complete (a reader never sees half a file). Throws ConfigError naming the path
// when it cannot.
void write_points_file(const Points& p, const std::string& path);
// Throws ConfigError naming the path unless a file can be created beside `path` (checked before
// a run, so that minutes of GPU time do not end in an unwritable path).
void check_points_path(const std::string& path);
// Takes out of the file (in_points_file = false) the sweeps of every term with fewer than k + 2
// points in all (a run cut short by its time budget), and returns those terms.
std::vector<std::string> leave_out_short_terms(Points& p);

// "YYYY-MM-DD" of t in UTC.
std::string utc_date(std::time_t t);
// The NVIDIA kernel module's version from the text of /proc/driver/nvidia/version ("NVRM version:
// NVIDIA UNIX x86_64 Kernel Module  580.65.06  ..."), or "" when the text has none.
std::string nvidia_driver_version(const std::string& proc_version_text);
// "13.0" for the CUDA driver API version 13000.
std::string cuda_version_text(int version);

}  // namespace kvtier::calibrate
