// The calibration's timer, graph capture and fills (cuda/calibrate/bench.hpp).
#include <cstring>
#include <utility>

#include "cuda/calibrate/bench.hpp"

namespace kvtier::calibrate {

namespace {

constexpr std::size_t kPadBytes = std::size_t{512} << 20;
constexpr std::size_t kPatternBytes = std::size_t{4} << 20;
constexpr int kWarmups = 2;

std::uint64_t splitmix(std::uint64_t& z) {
  std::uint64_t x = (z += 0x9E3779B97F4A7C15ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double unit(std::uint64_t& z) {  // uniform in [0, 1)
  return static_cast<double>(splitmix(z) >> 11) * 0x1p-53;
}

std::vector<std::byte> make_pattern(Pattern p) {
  std::vector<std::byte> v(kPatternBytes);
  std::uint64_t z = 20261202 + static_cast<std::uint64_t>(p);
  if (p == Pattern::bf16) {
    for (std::size_t i = 0; i < v.size(); i += 2) {
      const auto f = static_cast<float>(unit(z) * 2.0 - 1.0);
      std::uint32_t b;
      std::memcpy(&b, &f, 4);
      b += 0x7FFFu + ((b >> 16) & 1u);  // round to nearest even
      const auto h = static_cast<std::uint16_t>(b >> 16);
      std::memcpy(&v[i], &h, 2);
    }
  } else if (p == Pattern::fp8_codes) {
    // e4m3 (s eeee mmm): the lowest exponent bit cleared keeps the exponent below 1111, so no
    // code is NaN (0x7f, 0xff)
    for (auto& x : v)
      x = static_cast<std::byte>(splitmix(z) & 0xEFu);
  } else {
    for (std::size_t i = 0; i < v.size(); i += 4) {
      const auto f = static_cast<float>(0.005 + 0.015 * unit(z));
      std::memcpy(&v[i], &f, 4);
    }
  }
  return v;
}

}  // namespace

Timer::Timer(int repeats)
    : repeats_(repeats),
      stream_(cuda::make_stream()),
      a_(cuda::make_event()),
      b_(cuda::make_event()),
      pad_(kPadBytes) {}

void Timer::pad(cudaStream_t s) {
  KVT_CUDA_CHECK(cudaMemsetAsync(pad_.get(), 0, pad_.bytes(), s));
}

double Timer::elapsed_us() {
  KVT_CUDA_CHECK(cudaEventSynchronize(b_));
  float ms = 0;
  KVT_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
  return static_cast<double>(ms) * 1000.0;
}

double Timer::eager_us(const Enqueue& body, bool cold) {
  cudaStream_t s = stream_;
  for (int i = 0; i < kWarmups; ++i)
    body(s);
  KVT_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int i = 0; i < repeats_; ++i) {
    if (cold) {
      pad(s);
      KVT_CUDA_CHECK(cudaStreamSynchronize(s));
    }
    KVT_CUDA_CHECK(cudaEventRecord(a_, s));
    body(s);
    KVT_CUDA_CHECK(cudaEventRecord(b_, s));
    t.push_back(elapsed_us());
  }
  return median(std::move(t));
}

cuda::GraphExec capture_graph(cudaStream_t s, int calls, const Call& call, const Enqueue& after) {
  KVT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  try {
    for (int i = 0; i < calls; ++i)
      call(i, s);
    if (after) after(s);
  } catch (...) {
    cudaGraph_t broken = nullptr;
    (void)cudaStreamEndCapture(s, &broken);  // the stream leaves capture mode whatever it says
    if (broken != nullptr) (void)cudaGraphDestroy(broken);
    (void)cudaGetLastError();
    throw;
  }
  return cuda::end_capture(s);
}

double Timer::graph_us(int calls, const Call& call, const Enqueue& before, const Enqueue& after) {
  cudaStream_t s = stream_;
  last_calls_ = calls;
  const cuda::GraphExec g = capture_graph(s, calls, call, after);
  KVT_CUDA_CHECK(cudaGraphUpload(g, s));
  auto replay = [&] {
    if (before) before(s);
    pad(s);
    KVT_CUDA_CHECK(cudaEventRecord(a_, s));
    KVT_CUDA_CHECK(cudaGraphLaunch(g, s));
    KVT_CUDA_CHECK(cudaEventRecord(b_, s));
    return elapsed_us() / calls;
  };
  for (int i = 0; i < kWarmups; ++i)
    replay();
  std::vector<double> t;
  for (int i = 0; i < repeats_; ++i)
    t.push_back(replay());
  return median(std::move(t));
}

double Timer::kernel_us(int max_calls, double target_us, const Call& call, const Enqueue& before,
                        const Enqueue& after) {
  cudaStream_t s = stream_;
  if (before) before(s);
  call(0, s);  // loads the kernels' modules, allocates nothing timed
  if (after) after(s);
  KVT_CUDA_CHECK(cudaStreamSynchronize(s));
  if (before) before(s);
  pad(s);
  KVT_CUDA_CHECK(cudaEventRecord(a_, s));
  call(0, s);
  if (after) after(s);
  KVT_CUDA_CHECK(cudaEventRecord(b_, s));
  const double probe = elapsed_us();
  return graph_us(calls_per_graph(probe, target_us, max_calls), call, before, after);
}

Filler::Filler(cudaStream_t s) : bf16_(kPatternBytes), fp8_(kPatternBytes), scales_(kPatternBytes) {
  for (const auto& [dst, p] :
       {std::pair{&bf16_, Pattern::bf16}, std::pair{&fp8_, Pattern::fp8_codes},
        std::pair{&scales_, Pattern::scales}}) {
    const std::vector<std::byte> v = make_pattern(p);
    KVT_CUDA_CHECK(cudaMemcpyAsync(dst->get(), v.data(), v.size(), cudaMemcpyHostToDevice, s));
    KVT_CUDA_CHECK(cudaStreamSynchronize(s));  // v dies here
  }
}

void Filler::fill(void* dst, std::size_t bytes, Pattern p, cudaStream_t s) const {
  const std::byte* src = p == Pattern::bf16        ? bf16_.get()
                         : p == Pattern::fp8_codes ? fp8_.get()
                                                   : scales_.get();
  auto* out = static_cast<std::byte*>(dst);
  for (std::size_t off = 0; off < bytes; off += kPatternBytes) {
    const std::size_t n = std::min(kPatternBytes, bytes - off);
    KVT_CUDA_CHECK(cudaMemcpyAsync(out + off, src, n, cudaMemcpyDefault, s));
  }
}

Pattern Filler::bank_pattern(const PageLayout& l, int bank) {
  const BankKind kind = PageLayout::kind_of(bank % l.banks_per_layer);
  if (kind == BankKind::k_scale || kind == BankKind::v_scale) return Pattern::scales;
  return l.fp8() ? Pattern::fp8_codes : Pattern::bf16;
}

void Filler::fill(const cuda::DevicePool& pool, cudaStream_t s) const {
  settle();
  for (int b = 0; b < pool.banks(); ++b)
    fill(pool.bank(b), static_cast<std::size_t>(pool.bank_bytes(b)), bank_pattern(pool.layout(), b),
         s);
}

void Filler::fill(const cuda::HostBank& bank, cudaStream_t s) const {
  settle();
  for (int b = 0; b < bank.banks(); ++b)
    fill(bank.host(b), static_cast<std::size_t>(bank.bank_bytes(b)), bank_pattern(bank.layout(), b),
         s);
}

Series file_series(const std::string& term, const std::string& sweep, const std::string& timing) {
  Series s;
  s.term = term;
  s.sweep = sweep;
  s.inputs = term_inputs(term);
  s.timing = timing;
  return s;
}

Series extra_series(const std::string& name, std::vector<std::string> inputs,
                    const std::string& sweep, const std::string& timing) {
  Series s;
  s.term = name;
  s.sweep = sweep;
  s.inputs = std::move(inputs);
  s.in_points_file = false;
  s.timing = timing;
  return s;
}

bool stop_sweep(const Bench& b, Series& s) {
  if (!b.out_of_time()) return false;
  s.truncated = true;
  return true;
}

}  // namespace kvtier::calibrate
