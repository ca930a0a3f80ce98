#pragma once
// Where one-launch residency steps spend their time, from the stamps their kernel records
// (kernels.hpp, StepStamp): `kvtier bench residency` and `kvtier run --trace --step-phases`.
#include <cuda_runtime.h>

#include <string>

#include "cuda/cuda_check.hpp"
#include "cuda/kernels.hpp"

namespace kvtier::cuda {

// Medians over the launches recorded, in us.
struct StepPhases {
  int launches = 0;  // launches recorded
  // the leading block's phases, in kernel order (each from the end of the one before)
  double ticket = 0, compaction = 0, check = 0, mark = 0, sort = 0, victims = 0, install = 0,
         publish = 0;
  double copy_exit = 0;  // from the publish to the last block's end (the other blocks' copy)
  double span = 0;       // from the leader's first instruction to the last block's end
  double gap = 0;        // from a launch's end to the next launch's start on its lane
};

// "ticket 0.82, compaction 6.30, ..., gap 2.05" (us).
std::string describe(const StepPhases& p);

// A device buffer the step kernel records into (StepStamps), `launches` rows a lane, zeroed;
// launch k of a lane's ticket writes row k % launches of the lane's rows, so that a longer run
// keeps its last ones. Steps of several lanes (MirrorEngine's beside lanes) may overlap in time;
// a gap is measured between consecutive launches of one lane.
class StepStampRecorder {
 public:
  explicit StepStampRecorder(int launches, int lanes = 1);
  StepStamps stamps(int lane = 0) const {
    return {buf_.get() + static_cast<std::size_t>(lane) * launches_ * kStepStamps, launches_};
  }
  void clear();  // synchronous
  // Downloads the rows written since the last clear (synchronous) and summarises them; a
  // row counts when its kernel started (a nonzero start).
  StepPhases read() const;

 private:
  DeviceArray<unsigned long long> buf_;
  int launches_;
  int lanes_;
};

}  // namespace kvtier::cuda
