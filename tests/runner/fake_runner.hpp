#pragma once
// A runner without a GPU for the CPU tests of the session's bookkeeping (micro_batches.hpp,
// needle_protocol.hpp): the same calls as QsaRunner, and each request's next token a hash of
// every token it was given so far, so that a token routed to the wrong request, or a step
// lost or repeated, changes what follows. Calls are appended to a log that several runners
// may share.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda/runner/qsa_runner.hpp"

namespace kvtier::runner_test {

class FakeRunner {
 public:
  FakeRunner(int requests, std::string name, std::vector<std::string>* log)
      : history_(static_cast<std::size_t>(requests)), name_(std::move(name)), log_(log) {}

  // As QsaRunner::generate: prefill in chunks (on_forward after each forward), then `decode`
  // tokens per request, the last of them not given back to the runner.
  std::vector<std::vector<std::int32_t>> generate(
      const std::vector<std::vector<std::int32_t>>& prompts, int chunk, int decode,
      const std::function<void(std::int64_t, std::int64_t)>& on_forward = {}) {
    note("generate " + std::to_string(prompts.size()) + " x " + std::to_string(decode));
    std::int64_t total = 0, done = 0;
    for (const auto& p : prompts)
      total += static_cast<std::int64_t>(p.size());
    for (std::size_t b = 0;; b += static_cast<std::size_t>(chunk)) {
      bool any = false;
      for (std::size_t r = 0; r < prompts.size(); ++r)
        for (std::size_t i = b; i < prompts[r].size() && i < b + static_cast<std::size_t>(chunk);
             ++i) {
          history_[r].push_back(prompts[r][i]);
          ++done;
          any = true;
        }
      if (!any) break;
      if (on_forward) on_forward(done, total);
    }
    std::vector<std::vector<std::int32_t>> out(prompts.size());
    for (std::size_t r = 0; r < prompts.size(); ++r)
      for (int d = 0; d < decode; ++d) {
        out[r].push_back(next_token(r));
        if (d + 1 < decode) history_[r].push_back(out[r].back());
      }
    return out;
  }

  void launch_step(const std::vector<runner::RequestRows>& rows) {
    note("launch");
    if (!pending_.empty()) throw std::logic_error("fake: launch_step while a step is in flight");
    for (const auto& rr : rows) {
      const auto r = static_cast<std::size_t>(rr.request);
      history_.at(r).insert(history_[r].end(), rr.tokens.begin(), rr.tokens.end());
      pending_.push_back(next_token(r));
    }
  }
  std::vector<std::int32_t> finish_step() {
    note("finish");
    if (pending_.empty()) throw std::logic_error("fake: finish_step with nothing in flight");
    ++steps_;
    return std::exchange(pending_, {});
  }
  // As QsaRunner's: here every step after the runner's first `unsteady_steps` ones.
  bool last_step_steady() const { return steps_ > unsteady_steps; }
  int unsteady_steps = 1;
  std::vector<std::int32_t> step(const std::vector<runner::RequestRows>& rows) {
    launch_step(rows);
    return finish_step();
  }

  void set_probe(std::int64_t position) {
    note("probe " + std::to_string(position));
    probe_ = position;
  }
  std::int64_t probe() const { return probe_; }
  // What the needle protocol compares, per QSA layer (set by the test).
  std::vector<std::vector<float>> attention, values;
  const std::vector<std::vector<float>>& last_attention() const { return attention; }
  const std::vector<std::vector<float>>& probe_values() const { return values; }

  const std::vector<std::int32_t>& history(int request) const {
    return history_.at(static_cast<std::size_t>(request));
  }

 private:
  std::int32_t next_token(std::size_t r) const {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the request's tokens
    for (std::int32_t t : history_[r])
      h = (h ^ static_cast<std::uint32_t>(t)) * 0x100000001b3ull;
    return static_cast<std::int32_t>(h % 1000);
  }
  void note(const std::string& what) {
    if (log_ != nullptr) log_->push_back(name_ + ": " + what);
  }

  std::vector<std::vector<std::int32_t>> history_;
  std::vector<std::int32_t> pending_;
  int steps_ = 0;  // finish_step calls
  std::int64_t probe_ = -1;
  std::string name_;
  std::vector<std::string>* log_;
};

}  // namespace kvtier::runner_test
