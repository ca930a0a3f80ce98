// The trace replay's store, priced as the GPU runs it: one qsa::store_kv per layer writing every
// new token's K/V of the forward (a prefill chunk of ~4k tokens writes ~8 MiB per layer in
// bf16), into the pool at its HBM rate and, for host and mirror, into the host bank over the
// link within the same kernel, on the forward's critical path. (It was priced as one launch
// whatever it wrote, with the write-through beside the forward.)
#include <gtest/gtest.h>

#include <string>

#include "sim/profiles.hpp"
#include "sim/replay.hpp"

namespace kvtier::sim {
namespace {

constexpr int kChunk = 4000;  // the decode row after it writes into the chunk's last page

// One request: a prefill chunk of `tokens` tokens at position 0, then `decodes` decode rows.
// Every layer selects blocks {0, 5, 9} for the row's last token (plus its causal tail).
traces::TraceInput prefill_then_decode(int tokens, int decodes = 1) {
  const Geometry g;
  std::vector<traces::Record> r;
  r.emplace_back(traces::RequestBegin{1, tokens, 0, 0});
  auto forward = [&](traces::ForwardRow row) {
    traces::Forward f;
    f.rows = {row};
    f.layers = g.qsa_layers();
    f.offsets.push_back(0);
    for (int l = 0; l < f.layers; ++l) {
      f.ids.insert(f.ids.end(), {0, 5, 9});
      f.offsets.push_back(static_cast<std::int64_t>(f.ids.size()));
    }
    r.emplace_back(std::move(f));
  };
  forward({1, 0, tokens, traces::RowKind::prefill});
  for (int d = 0; d < decodes; ++d)
    forward({1, tokens + d, 1, traces::RowKind::decode});
  r.emplace_back(traces::RequestEnd{1});
  traces::TraceHeader h;
  h.geometry = g;
  return traces::memory_trace("prefill", h, std::move(r));
}

struct Replay {
  std::vector<TimeNs> stores;  // [forwards x layers] each store's time
  std::vector<TimeNs> spans;   // [forwards]
};

Replay replay(const CostModel& cost, Placement p, int tokens, KvDtype dtype = KvDtype::bf16,
              bool copy_first = false, int decodes = 1) {
  const traces::TraceInput t = prefill_then_decode(tokens, decodes);
  SimConfig c;
  c.placement = p;
  c.forward = frontend::ForwardKind::trace_replay;
  c.pool_slots = p == Placement::mirror ? 4096 : 0;
  c.dtype = dtype;
  c.copy_first = copy_first;
  c.record_timeline = true;
  c.record_forwards = true;
  const SimResult r = simulate(t, frontend::scan_trace(t), cost, c);
  Replay out;
  for (const OpRecord& o : r.timeline)
    if (o.resource == Resource::compute && std::string(o.name) == "store")
      out.stores.push_back(o.end - o.start);
  for (const ForwardTime& f : r.forwards_detail)
    out.spans.push_back(f.span_ns);
  return out;
}

const HardwareProfile& h200() {
  static const HardwareProfile p = load_profile("h200-pcie5");
  return p;
}

constexpr std::int64_t kLayers = 12;
constexpr std::int64_t kBf16 = 2048, kFp8 = 1040;  // bytes of one token of one layer

TEST(ReplayStore, DevicePrefillStoreIsPricedByTheBytesItWritesToThePool) {
  const CostModel cost(h200());
  const Replay r = replay(cost, Placement::device, kChunk);
  ASSERT_EQ(r.stores.size(), 2u * kLayers);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(r.stores[l], cost.store_ns(kChunk * kBf16, 0)) << l;   // 8 MB into HBM
    EXPECT_EQ(r.stores[kLayers + l], cost.store_ns(kBf16, 0)) << l;  // the decode token
  }
  // Beyond its fixed part, the store's time follows the bytes: half the chunk, half the time.
  const TimeNs fixed = cost.store_ns(0, 0);
  const Replay half = replay(cost, Placement::device, kChunk / 2);
  EXPECT_NEAR(static_cast<double>(r.stores[0] - fixed),
              2.0 * static_cast<double>(half.stores[0] - fixed), 1.0);
  EXPECT_GT(r.stores[0] - fixed, 4000);  // 8 MB at the profile's rate: microseconds, not 0
}

TEST(ReplayStore, HostPrefillStoreWritesThroughTheLinkOnTheForwardsPath) {
  const CostModel cost(h200());
  const Replay r = replay(cost, Placement::host, kChunk);
  ASSERT_EQ(r.stores.size(), 2u * kLayers);
  const TimeNs store = cost.store_ns(0, kChunk * kBf16);
  EXPECT_EQ(r.stores[0], store);
  EXPECT_GT(store, 150'000);  // 8 MB at the link's ~52 GB/s: ~160 us per layer
  // Every layer's store is inside the forward's span (the replay's gpu_us times it).
  EXPECT_GE(r.spans[0], kLayers * store);
}

TEST(ReplayStore, Fp8StoresCodesAndScalesByTheirOwnTerms) {
  const CostModel cost(h200());
  const Replay dev = replay(cost, Placement::device, kChunk, KvDtype::fp8);
  EXPECT_EQ(dev.stores[0], cost.store_ns(kChunk * kFp8, 0, KvDtype::fp8));
  const Replay host = replay(cost, Placement::host, kChunk, KvDtype::fp8);
  EXPECT_EQ(host.stores[0], cost.store_ns(0, kChunk * kFp8, KvDtype::fp8));
}

// The mirror writes the host bank always and the pool where the page is resident when the
// store runs: with the step first, every write page (installed by the step); in place (the
// tables located before the forward), only pages already resident. A chunk of 4,031 tokens
// ends one short of its last page (positions 3,968 .. 4,031): the first decode row (step
// first: the forward before it was a prefill) writes that page's last position, which the
// chunk's step installed; the second reads in place (the first missed nothing) and its token
// starts a new page, which is not resident when the store runs.
TEST(ReplayStore, MirrorWritesThePoolWhereTheStoreFindsItsPages) {
  const CostModel cost(h200());
  const Replay first = replay(cost, Placement::mirror, kChunk, KvDtype::bf16, true);
  EXPECT_EQ(first.stores[0], cost.store_ns(kChunk * kBf16, kChunk * kBf16));
  constexpr int kShort = 4031;
  const Replay r = replay(cost, Placement::mirror, kShort, KvDtype::bf16, false, 2);
  ASSERT_EQ(r.stores.size(), 3u * kLayers);
  EXPECT_EQ(r.stores[0], cost.store_ns(kShort * kBf16, kShort * kBf16));  // prefill: step first
  EXPECT_EQ(r.stores[kLayers], cost.store_ns(kBf16, kBf16));
  EXPECT_EQ(r.stores[2 * kLayers], cost.store_ns(0, kBf16));  // in place, a page not yet resident
}

}  // namespace
}  // namespace kvtier::sim
