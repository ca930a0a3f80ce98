#pragma once
// What `kvtier run --weights` shows of a session (cli/run_model.cpp runs it): its progress as
// bars on stderr, its figures as a table or JSON. Printing only: every figure is derived from
// the session's counters.
#include <memory>
#include <optional>
#include <string>

#include "cli/progress.hpp"
#include "cuda/runner/session.hpp"
#include "model/geometry.hpp"
#include "model/micro_batch_choice.hpp"

namespace kvtier::cli {

// The session's progress as bars on stderr: a bar per phase from its first report (phases
// come one after another), closed when the phase ends.
class SessionBars {
 public:
  runner::SessionProgress callbacks() {
    return {[this](runner::SessionPhase phase, std::uint64_t done, std::uint64_t total) {
              if (!bar_)
                bar_ = phase == runner::SessionPhase::host_bank
                           ? std::make_unique<Progress>("host bank", total, "bytes")
                           : std::make_unique<Progress>("prefill", total, "tokens");
              bar_->update(done);
            },
            [this](runner::SessionPhase) {
              if (bar_) bar_->finish();
              bar_.reset();
            }};
  }

 private:
  std::unique_ptr<Progress> bar_;
};

// The session's options, figures and tokens as one JSON object on stdout; `micro` is what
// --micro-batches auto estimated (null without it).
void print_run_json(const runner::SessionOptions& o, const std::string& weights_path,
                    const runner::SessionResult& res, const std::optional<MicroBatchChoice>& micro);

// The same as a table for people, and with --profile the GPU time of each phase.
void print_run_table(const runner::SessionOptions& o, const Geometry& g,
                     const runner::SessionResult& res,
                     const std::optional<MicroBatchChoice>& micro);

}  // namespace kvtier::cli
