#pragma once
// The state of a QsaRunner (qsa_runner.cpp: construction, batching, fill, recording;
// runner_layer.cpp: one QSA layer of a forward, per placement). Private to cuda/runner.
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/device_counters.hpp"
#include "cuda/qsa/qsa_kernels.hpp"
#include "cuda/runner/gemm.hpp"
#include "cuda/runner/paged_kv.hpp"
#include "cuda/runner/qsa_runner.hpp"
#include "frontend/forward_schedule.hpp"
#include "frontend/front_end.hpp"

namespace kvtier::runner {

using cuda::DeviceArray;
using cuda::DeviceCounters;

// Host vector -> the head of a preallocated device array, on stream s.
template <class T>
void upload(DeviceArray<T>& d, const std::vector<T>& v, cudaStream_t s) {
  if (v.size() > d.size()) throw std::logic_error("runner: staging buffer too small");
  if (!v.empty())
    KVT_CUDA_CHECK(
        cudaMemcpyAsync(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, s));
}

struct LayerWeights {
  DeviceArray<std::uint16_t> input_norm, q, k, v, iq, ik, gate, o;
  DeviceArray<float> iq_norm, ik_norm;
  DeviceArray<std::uint16_t> slab;  // [requests][slab_stride][128]
  DeviceArray<float> ring;          // [requests][4][128]
};

// What the host prepared for one forward (the trace description and its device copies).
struct ForwardPlan {
  traces::Forward trace;        // rows per request (selections filled when recording)
  int rows = 0;                 // query rows
  int trows = 0;                // trace rows (requests in the forward)
  bool decode = false;          // every request has one row
  bool in_place = false;        // mirror decode: misses read in place beside the step
  int request_rows = 1;         // the most rows any request has in this forward
  bool staged = false;          // host / mirror prefill through staging windows
  int width_pages = 0;          // mirror: the core's select width
  int writes = 0;               // mirror: write pages at the head of the query
  std::int64_t max_blocks = 1;  // most visible blocks of any row
  std::int64_t step_base = 0;   // forward index * layers (the simulator's stamps)
  int splits = 1;               // attend splits for this forward's rows
  std::vector<std::int32_t> row_req;
  std::vector<std::int32_t> row_pos;
};

// A forward between QsaRunner::launch_step and finish_step.
struct QsaRunner::PendingStep {
  ForwardPlan plan;  // its trace rows say which requests advance by how many tokens
  std::chrono::steady_clock::time_point t0;  // launch_step's start (the forward's wall time)
  bool steady = false;  // a decode forward of a shape seen before that captured no graph
};

struct QsaRunner::Impl {
  Geometry g;
  std::int64_t vocab = 0;
  RunnerConfig c;
  qsa::Rope rope;
  Gemm gemm;
  cudaStream_t s = nullptr;
  int qd = 0, kvd = 0, iqd = 0, ikd = 0, k = 0, width = 0, R = 0, L = 0;
  std::int64_t stride = 0, slab_stride = 0;
  std::int64_t other_device_bytes = 0;
  std::optional<PagedKv> kv;
  std::optional<frontend::FrontEnd> fe;
  std::vector<std::int64_t> pos, prompt;
  std::vector<bool> opened, begun;
  std::int64_t forwards = 0;
  traces::TraceWriter* recorder = nullptr;
  std::vector<std::vector<std::int32_t>> recorded;  // [layer * trows + trow] when recording

  DeviceArray<std::uint16_t> embed, final_norm, lm_head;
  std::vector<LayerWeights> layers;
  // stand-in MLP (one weight set shared by every non-QSA layer)
  DeviceArray<std::uint16_t> mlp_up, mlp_gate, mlp_down, mlp_norm, mlp_a, mlp_b;

  // per forward
  DeviceArray<std::int32_t> tokens, req, rpos, fwd, tables, pool_tbl, wtable, blocks, sel, sel_w,
      group_of_row, lists, counts, last_idx, argmax_out, topk_work;
  DeviceArray<std::uint32_t> bitmap;
  DeviceArray<PageId> trow_tables, query;
  DeviceArray<std::int64_t> trow_len, trow_pos, stamps;
  DeviceArray<std::int64_t> prefetch_stamps;  // [layers] the prefetch policy's
  DeviceArray<std::uint8_t> trow_bypass;      // mirror: FrontEnd::bypass (compaction's tail_only)
  std::vector<std::uint8_t> trow_bypass_host;
  DeviceArray<DeviceCounters> counters;
  DeviceArray<float> hidden, o, o_w, lse, lse_w, work, logits_idx, logits_vocab, last_hidden;
  DeviceArray<std::uint16_t> xn, q, kk, v, iq_raw, iq, ik, gate, attn_g;

  // Decode graphs by shape (rows, mirror width pages, write pages; the attend splits follow
  // from the rows): seen once -> captured.
  using GraphKey = std::tuple<int, int, int, bool>;  // ... and ForwardPlan::in_place
  std::map<GraphKey, int> graph_seen;
  std::map<GraphKey, int> decode_shapes_seen;  // every decode forward's, graphs or not
  std::map<GraphKey, cudaGraphExec_t> graphs;
  cudaEvent_t ev_a = nullptr, ev_b = nullptr;
  // Mirror decode with in-place reads: the residency steps' stream beside s, the fork, and
  // each layer's join (waited for before the next layer's top-k rewrites the selection the
  // step reads, and at the end of the forward): pending_join indexes ev_join, or -1.
  cudaStream_t side = nullptr;
  cudaEvent_t ev_fork = nullptr, ev_join[2] = {nullptr, nullptr};
  int pending_join = -1;
  void join_residency();
  // reads_yield: the stream of the host decode attention (lowest priority; s has the highest),
  // forked from s before it and joined after.
  cudaStream_t reads = nullptr;
  cudaEvent_t ev_reads_fork = nullptr, ev_reads_join = nullptr;
  // Mirror, prefetch policy: the last prefetch (issued on `side` after a layer's residency
  // step, into the next layer's pool) is done at ev_prefetched; the next step waits for it.
  cudaEvent_t ev_prefetched = nullptr;
  bool prefetch_pending = false;
  bool prefetches() const {
    return c.placement == Placement::mirror && c.policy == MirrorPolicy::prefetch;
  }
  void prefetch_next_layer(int li, int n);
  void wait_for_prefetch();
  // Mirror decode may read the pages it misses in place (bf16, lru, unless copy_first); a
  // decode forward does when frontend::decode_reads_in_place says so of the forward before it.
  bool in_place_decode() const;
  bool in_place(const ForwardPlan& p) const { return p.in_place; }
  frontend::LastForward last;  // the forward before (mirror: its demand misses)
  // Phase timing (profile_phases): an event per mark, names of the phase each closes.
  std::vector<cudaEvent_t> phase_events;
  std::vector<std::string> phase_names;
  std::size_t phase_used = 0;
  bool phases_on = false;
  void mark(const char* phase);  // closes `phase` (the work since the previous mark)

  // The GPU work of a planned forward: embedding, every layer, each request's LM head pick.
  void forward_work(const ForwardPlan& p, QsaRunner& owner);
  // One QSA layer (index li among the QSA layers) of the planned forward (runner_layer.cpp).
  void qsa_layer(int li, const ForwardPlan& p, QsaRunner& owner);
  void attend_staged(int li, const ForwardPlan& p, qsa::Rows r, RunnerStats& st);
  void stand_in_mlp(int rows);
  // The forward's cuBLAS-sized calls, each in one place so that QsaRunner::warm_up calls what
  // the forward calls: the six projections of the normed rows (xn -> q .. gate), the output
  // projection (attn_g added into hidden), the LM head of `trows` last rows (xn -> logits).
  void input_projections(const LayerWeights& l, int rows);
  void output_projection(const LayerWeights& l, int rows);
  void lm_head_logits(int trows);
};

}  // namespace kvtier::runner
