// Index scoring (qsa::index_scores: indexer) and top-k + expand (qsa::topk, qsa::expand: the
// series of the kernel the runner takes, TopkPath: topk, topk_one_cta, topk_chain) over
// row-blocks, as the runner calls them: decode rows (one request each) over contexts of 16k to 1M
// tokens, and the prefill shape (many rows of one request), whose top-k points join the decode
// rows' of the same kernel and whose index scores take the prefill kernel (indexer_prefill).
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/calibrate/bench.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "model/cost_model.hpp"

namespace kvtier::calibrate {
namespace {

constexpr int kIndexHeads = 4;
constexpr int kTopK = 512;
constexpr int kRatio = 4;
constexpr int kWidth = kTopK * kRatio + kRatio - 1;  // 2051 positions per row

struct Shape {
  int rows;
  std::int64_t context;
  bool prefill;  // rows of one request ending at the context; else one request per row
};

// Buffers sized for the largest point of the group.
struct SelectionBuffers {
  cuda::DeviceArray<std::uint16_t> slab;  // [requests][blocks][128] of every call of a point
  cuda::DeviceArray<std::uint16_t> iq;    // [calls * rows][4][128]
  cuda::DeviceArray<float> logits;        // [calls * rows][blocks]
  cuda::DeviceArray<std::int32_t> blocks, tokens;
  cuda::DeviceArray<std::byte> topk_work;
};

std::int64_t blocks_of(const Shape& sh) {
  return sh.context / kRatio;
}
int requests_per_call(const Shape& sh) {
  return sh.prefill ? 1 : sh.rows;
}
std::int64_t slab_bytes_per_call(const Shape& sh) {
  return requests_per_call(sh) * blocks_of(sh) * qsa::kIndexDim * 2;
}
std::int64_t logits_bytes_per_call(const Shape& sh) {
  return sh.rows * blocks_of(sh) * 4;
}

SelectionBuffers make_buffers(Bench& b, const std::vector<Shape>& shapes) {
  const CalibrationGrid& g = b.grid;
  std::int64_t slab = g.slab_bytes, logits = g.logits_bytes, work = 4;
  int rows = 1;
  for (const Shape& sh : shapes) {
    slab = std::max(slab, slab_bytes_per_call(sh));  // one call always fits
    logits = std::max(logits, logits_bytes_per_call(sh));
    work = std::max(work, qsa::topk_workspace_bytes(sh.rows, blocks_of(sh)));
    rows = std::max(rows, sh.rows);
  }
  SelectionBuffers s;
  s.slab = cuda::DeviceArray<std::uint16_t>(static_cast<std::size_t>(slab / 2));
  s.iq = cuda::DeviceArray<std::uint16_t>(static_cast<std::size_t>(g.max_calls) * rows *
                                          kIndexHeads * qsa::kIndexDim);
  s.logits = cuda::DeviceArray<float>(static_cast<std::size_t>(logits / 4));
  s.blocks = cuda::DeviceArray<std::int32_t>(static_cast<std::size_t>(rows) * kTopK);
  s.tokens = cuda::DeviceArray<std::int32_t>(static_cast<std::size_t>(rows) * kWidth);
  s.topk_work = cuda::DeviceArray<std::byte>(static_cast<std::size_t>(work));
  b.filler.fill(s.slab.get(), s.slab.bytes(), Pattern::bf16, b.stream());
  b.filler.fill(s.iq.get(), s.iq.bytes(), Pattern::bf16, b.stream());
  KVT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  return s;
}

// One point: index_scores and topk + expand of `sh`, each call over its own requests' slabs and
// logits. Appends [row_blocks, us] to index and to the top-k series of the kernel the runner
// takes for the shape (TopkPath: cluster, one CTA per row, chain).
struct TopkSeries {
  Series cluster, one_cta, chain;
  Series& of(TopkPath p) {
    return p == TopkPath::one_cta ? one_cta : p == TopkPath::chain ? chain : cluster;
  }
  std::array<Series*, 3> all() { return {&cluster, &one_cta, &chain}; }
};
void time_shape(Bench& b, SelectionBuffers& buf, const Shape& sh, Series& index, TopkSeries& topk) {
  const std::int64_t nb = blocks_of(sh);
  const TopkPath path = topk_path(sh.rows, nb);  // the runner's rule
  const int calls = static_cast<int>(std::max<std::int64_t>(
      1, std::min({std::int64_t{b.grid.max_calls},
                   static_cast<std::int64_t>(buf.slab.bytes()) / slab_bytes_per_call(sh),
                   static_cast<std::int64_t>(buf.logits.bytes()) / logits_bytes_per_call(sh)})));
  std::vector<std::int32_t> req, pos;
  double row_blocks = 0;
  for (int c = 0; c < calls; ++c) {
    for (int r = 0; r < sh.rows; ++r) {
      req.push_back(sh.prefill ? c : c * sh.rows + r);
      const auto p =
          static_cast<std::int32_t>(sh.prefill ? sh.context - sh.rows + r : sh.context - 1);
      pos.push_back(p);
      if (c == 0) row_blocks += static_cast<double>((p + 1) / kRatio);
    }
  }
  const auto d_req = to_device(req), d_pos = to_device(pos);
  auto rows_of = [&](int c) {
    return qsa::Rows{d_req.get() + std::int64_t{c} * sh.rows,
                     d_pos.get() + std::int64_t{c} * sh.rows, sh.rows};
  };
  auto logits_of = [&](int c) { return buf.logits.get() + std::int64_t{c} * sh.rows * nb; };
  const Call score = [&](int c, cudaStream_t st) {
    // the most rows any request has, as the runner passes it: decode rows (one request each)
    // take the decode kernel at every row count
    qsa::index_scores(buf.iq.get() + std::int64_t{c} * sh.rows * kIndexHeads * qsa::kIndexDim,
                      kIndexHeads, rows_of(c), buf.slab.get(), nb, logits_of(c), nb, nb, st,
                      sh.prefill ? sh.rows : 1);
  };
  index.points.push_back({row_blocks, b.kernel_us(score, {}, calls)});
  for (int c = 0; c < calls; ++c)  // every call's logits, for the top-k to select from
    score(c, b.stream());
  KVT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  const Call select = [&](int c, cudaStream_t st) {
    if (path == TopkPath::one_cta) {
      qsa::topk(logits_of(c), nb, nullptr, rows_of(c), kRatio, kTopK, buf.blocks.get(), st);
    } else {
      qsa::topk(logits_of(c), nb, nullptr, rows_of(c), kRatio, kTopK, buf.blocks.get(),
                buf.topk_work.get(), nb, st);
    }
    qsa::expand(buf.blocks.get(), kTopK, rows_of(c), kRatio, buf.tokens.get(), kWidth, st);
  };
  const double us = b.kernel_us(select, {}, calls);
  if (path == TopkPath::one_cta)  // one CTA a row: its rows are an input of their own
    topk.of(path).points.push_back({row_blocks, static_cast<double>(sh.rows), us});
  else
    topk.of(path).points.push_back({row_blocks, us});
}

}  // namespace

void run_selection(Bench& b, const Emit& emit) {
  const CalibrationGrid& g = b.grid;
  std::vector<Shape> decode, prefill;
  for (const int rows : g.index_rows)
    for (const std::int64_t ctx : g.index_contexts)
      decode.push_back({rows, ctx, false});
  for (const int rows : g.prefill_rows)
    for (const std::int64_t ctx : g.prefill_contexts)
      prefill.push_back({rows, ctx, true});
  std::vector<Shape> all = decode;
  all.insert(all.end(), prefill.begin(), prefill.end());
  SelectionBuffers buf = make_buffers(b, all);
  const std::string timing =
      "graph of calls over other requests' slabs each, after a pad; per call";
  // Both sweeps of one shape (index and top-k share their logits), then emitted: the index,
  // then each top-k kernel's series that has points.
  auto sweep = [&](const std::vector<Shape>& shapes, Series index, TopkSeries topk) {
    for (const Shape& sh : shapes) {
      if (stop_sweep(b, index)) {
        for (Series* s : topk.all())
          s->truncated = true;
        break;
      }
      time_shape(b, buf, sh, index, topk);
    }
    emit(std::move(index));
    for (Series* s : topk.all())
      if (!s->points.empty()) emit(std::move(*s));
  };
  const auto topk_series = [&](const char* shape) {
    const std::string what = std::string("qsa::topk + qsa::expand (k 512), ") + shape;
    const auto make = [&](const char* term, const char* kernel) {
      return file_series(term, what + ": " + kernel, timing);
    };
    return TopkSeries{make("topk", "cluster kernel, up to 16 rows"),
                      make("topk_one_cta", "one CTA per row"),
                      make("topk_chain", "multi-CTA chain")};
  };
  sweep(decode, file_series("indexer", "qsa::index_scores, decode rows (one request each)", timing),
        topk_series("decode rows"));
  // the prefill shape: its index scores take the prefill kernel (IndexPath::prefill, its own
  // term); its top-k, the kernel the same rule picks (one CTA per row), with the decode rows'
  // points
  sweep(prefill,
        file_series("indexer_prefill",
                    "qsa::index_scores, prefill rows of one request (the prefill kernel)", timing),
        topk_series("prefill rows of one request"));
}

}  // namespace kvtier::calibrate
