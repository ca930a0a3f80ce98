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

StepStampRecorder::StepStampRecorder(int launches)
    : buf_(static_cast<std::size_t>(launches) * kStepStamps), launches_(launches) {
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
  for (int i = 0; i < launches_; ++i) {
    const unsigned long long* r = h.data() + static_cast<std::size_t>(i) * kStepStamps;
    if (r[kStampStartNs] != 0 && r[kStampEndNs] != 0) rows.push_back(r);
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
  // launches in start order (a ring's rows start at an arbitrary one)
  std::sort(rows.begin(), rows.end(),
            [](const auto* a, const auto* b) { return a[kStampStartNs] < b[kStampStartNs]; });
  std::vector<double> tail, span, gap;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    tail.push_back(since(rows[i][kStampPublishedNs], rows[i][kStampEndNs]) / 1e3);
    span.push_back(since(rows[i][kStampStartNs], rows[i][kStampEndNs]) / 1e3);
    if (i + 1 < rows.size())
      gap.push_back(since(rows[i][kStampEndNs], rows[i + 1][kStampStartNs]) / 1e3);
  }
  p.copy_exit = median(tail);
  p.span = median(span);
  p.gap = median(gap);
  return p;
}

}  // namespace kvtier::cuda
