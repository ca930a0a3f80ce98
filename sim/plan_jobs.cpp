#include "sim/plan_jobs.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kvtier::sim {

void run_jobs(std::size_t n, int threads, const std::function<void(std::size_t)>& job,
              WorkCount& work, const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::condition_variable ended;
  std::size_t running = 0;
  std::exception_ptr err;
  auto worker = [&] {
    for (std::size_t i = next++; i < n; i = next++) {
      try {
        job(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!err) err = std::current_exception();
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    ended.notify_all();
  };
  const auto t = static_cast<std::size_t>(std::max(1, threads));
  std::vector<std::thread> pool;
  {
    std::lock_guard<std::mutex> lock(mu);
    running = std::min(t, n);
  }
  for (std::size_t i = 0; i < std::min(t, n); ++i)
    pool.emplace_back(worker);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu);
      ended.wait_for(lock, std::chrono::milliseconds(100), [&] { return running == 0; });
      if (running == 0) break;
    }
    if (progress) progress(work.done.load(), work.total.load());
  }
  for (auto& th : pool)
    th.join();
  if (progress) progress(work.done.load(), work.total.load());
  if (err) std::rethrow_exception(err);
}

}  // namespace kvtier::sim
