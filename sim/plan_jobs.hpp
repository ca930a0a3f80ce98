#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace kvtier::sim {

// Work done and to do in a stage of the planner, in units its jobs count up from any thread
// (forwards replayed, for passes over the trace). The total may grow while the stage runs.
struct WorkCount {
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::uint64_t> total{0};
};

// Runs job(0) .. job(n - 1) on up to `threads` threads, in order of their index as threads
// come free; each job writes only its own results. The calling thread only watches: it calls
// progress(done, total) about ten times a second and once at the end, so that a progress bar
// moves during long jobs and is drawn from one thread. The first exception a job throws is
// rethrown here once every job has ended.
void run_jobs(std::size_t n, int threads, const std::function<void(std::size_t)>& job,
              WorkCount& work, const std::function<void(std::uint64_t, std::uint64_t)>& progress);

}  // namespace kvtier::sim
