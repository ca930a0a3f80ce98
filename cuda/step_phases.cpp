#include "cuda/step_phases.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace kvtier::cuda {
namespace {

// b - a of two stamps, signed (the global timer counts ns since an epoch: too many digits
// for a double before the subtraction)
double since(unsigned long long a, unsigned long long b) {
  return static_cast<double>(static_cast<long long>(b - a));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::string describe(const StepPhases& p) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "ticket %.2f, compaction %.2f, check %.2f, mark %.2f, sort %.2f, victims %.2f, "
                "install %.2f, publish %.2f, copy + exit %.2f (span %.2f), gap to the next "
                "start %.2f",
                p.ticket, p.compaction, p.check, p.mark, p.sort, p.victims, p.install, p.publish,
                p.copy_exit, p.span, p.gap);
  return buf;
}

StepStampRecorder::StepStampRecorder(int launches, int lanes)
    : buf_(static_cast<std::size_t>(launches) * lanes * kStepStamps),
      launches_(launches),
      lanes_(lanes) {
  clear();
}

void StepStampRecorder::clear() {
  KVT_CUDA_CHECK(cudaMemset(buf_.get(), 0, buf_.bytes()));
}

StepPhases StepStampRecorder::read() const {
  KVT_CUDA_CHECK(cudaDeviceSynchronize());  // the launches recorded are done
  std::vector<unsigned long long> h(buf_.size());
  KVT_CUDA_CHECK(cudaMemcpy(h.data(), buf_.get(), buf_.bytes(), cudaMemcpyDeviceToHost));
  std::vector<const unsigned long long*> rows;
  std::vector<std::vector<const unsigned long long*>> lane_rows(static_cast<std::size_t>(lanes_));
  for (int i = 0; i < launches_ * lanes_; ++i) {
    const unsigned long long* r = h.data() + static_cast<std::size_t>(i) * kStepStamps;
    if (r[kStampStartNs] == 0 || r[kStampEndNs] == 0) continue;
    rows.push_back(r);
    lane_rows[static_cast<std::size_t>(i / launches_)].push_back(r);
  }
  StepPhases p;
  p.launches = static_cast<int>(rows.size());
  if (rows.empty()) return p;
  // ns per cycle over all launches: the global timer's tick may be coarse, the sum is not
  double ns = 0, cycles = 0;
  for (const auto* r : rows) {
    ns += since(r[kStampStartNs], r[kStampPublishedNs]);
    cycles += since(r[kStampStart], r[kStampPublished]);
  }
  int clock_khz = 0;
  KVT_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double ns_per_cycle = ns > 0 && cycles > 0 ? ns / cycles : 1e6 / clock_khz;
  auto phase = [&](StepStamp from, StepStamp to) {
    std::vector<double> v;
    for (const auto* r : rows)
      v.push_back(since(r[from], r[to]) * ns_per_cycle / 1e3);
    return median(v);
  };
  p.ticket = phase(kStampStart, kStampTicket);
  p.compaction = phase(kStampTicket, kStampCompacted);
  p.check = phase(kStampCompacted, kStampChecked);
  p.mark = phase(kStampChecked, kStampMarked);
  p.sort = phase(kStampMarked, kStampSorted);
  p.victims = phase(kStampSorted, kStampVictims);
  p.install = phase(kStampVictims, kStampInstalled);
  p.publish = phase(kStampInstalled, kStampPublished);
  std::vector<double> tail, span, gap;
  for (const auto* r : rows) {
    tail.push_back(since(r[kStampPublishedNs], r[kStampEndNs]) / 1e3);
    span.push_back(since(r[kStampStartNs], r[kStampEndNs]) / 1e3);
  }
  // each lane's launches in start order (a ring's rows start at an arbitrary one)
  for (auto& own : lane_rows) {
    std::sort(own.begin(), own.end(),
              [](const auto* a, const auto* b) { return a[kStampStartNs] < b[kStampStartNs]; });
    for (std::size_t i = 0; i + 1 < own.size(); ++i)
      gap.push_back(since(own[i][kStampEndNs], own[i + 1][kStampStartNs]) / 1e3);
  }
  p.copy_exit = median(tail);
  p.span = median(span);
  p.gap = median(gap);
  return p;
}

}  // namespace kvtier::cuda
