// The CUDA mirror engine and the simulator's functional store, driven with the same random
// operation sequences (token stores, ensures of random selections and batch sizes, flushes;
// bf16 and fp8; per-layer and all-layer units; pools from "barely fits" to "everything
// fits"), make identical copy lists and states, and every selected page read through each
// block table is bit-identical between them and to the bytes last written.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "cuda/engine.hpp"
#include "model/capacity_error.hpp"
#include "sim/functional_store.hpp"
#include "tests/cuda/gpu_test_util.hpp"

namespace kvtier::cuda {
namespace {

struct Case {
  Geometry g;
  bool fp8;
  ResidencyUnit unit;
  PageId pages;
  SlotId slots;
  int max_distinct;  // distinct pages one ensure may query and still fit
};

Case make_case(std::mt19937_64& rng) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Case c;
  const int layers = uni(1, 3);
  c.g.qsa_layer_ids.clear();
  for (int l = 0; l < layers; ++l)
    c.g.qsa_layer_ids.push_back(l);
  c.g.page_size = 4 * uni(1, 3);
  c.g.kv_heads = uni(1, 2);
  const int dims[] = {3, 4, 7, 8, 16};
  c.g.head_dim = dims[uni(0, 4)];
  c.fp8 = uni(0, 1) == 1;
  c.unit = uni(0, 1) ? ResidencyUnit::layer_page : ResidencyUnit::all_layers_page;
  c.pages = uni(2, 40);
  c.max_distinct = uni(1, std::min<int>(c.pages, 12));
  c.slots = uni(c.max_distinct, c.pages + 2);  // barely fits .. everything fits
  return c;
}

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::int64_t n) {
  std::vector<std::byte> v(static_cast<std::size_t>(n));
  for (auto& b : v)
    b = static_cast<std::byte>(rng() & 0xff);
  return v;
}

// Every selected page, every layer its unit covers, every bank kind: the bytes read through
// the GPU's block table == through the functional store's == the bytes last written, and
// the GPU's host bank page == the store's.
void check_pages(MirrorEngine& gpu, const sim::FunctionalStore& ref, int layer,
                 const std::set<PageId>& pages) {
  const PageLayout& L = ref.layout();
  const int first = ref.unit() == ResidencyUnit::layer_page ? layer : 0;
  const int last = ref.unit() == ResidencyUnit::layer_page ? layer + 1 : L.layers;
  const std::vector<PageId> list(pages.begin(), pages.end());
  for (int l = first; l < last; ++l) {
    const std::vector<SlotId> slots = gpu.translate(l, list);
    for (std::size_t i = 0; i < list.size(); ++i)
      RC_ASSERT(slots[i] == ref.slot_for(l, list[i]));
    for (int k = 0; k < L.banks_per_layer; ++k) {
      const BankKind kind = PageLayout::kind_of(k);
      const std::vector<std::byte> bank = gpu.download_pool_bank(l * L.banks_per_layer + k);
      const std::int64_t pb = L.page_bytes(kind);
      for (std::size_t i = 0; i < list.size(); ++i) {
        const auto want = ref.read_through_table(l, kind, list[i]);
        const auto host = ref.host_page(l, kind, list[i]);
        RC_ASSERT(std::equal(want.begin(), want.end(), host.begin(), host.end()));
        const std::byte* got = bank.data() + slots[i] * pb;
        RC_ASSERT(std::memcmp(got, want.data(), want.size()) == 0);
        const std::vector<std::byte> gh = gpu.host_page(l, kind, list[i]);
        RC_ASSERT(std::equal(gh.begin(), gh.end(), host.begin(), host.end()));
      }
    }
  }
}

void run_sequence(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const Case c = make_case(rng);
  const KvDtype dtype = c.fp8 ? KvDtype::fp8 : KvDtype::bf16;
  sim::FunctionalStore ref(c.g, dtype, c.unit, c.pages, c.slots);
  const PageLayout L = ref.layout();
  const int max_query = 64;
  MirrorEngine gpu(MirrorConfig{L, c.unit, c.pages, c.slots, max_query,
                                uni(0, 3) == 0 ? EnsureForm::core_thread : EnsureForm::block});
  std::int64_t step = 0;
  const int ops = uni(1, 30);
  for (int op = 0; op < ops; ++op) {
    const int kind = uni(0, 19);
    const int layer = uni(0, L.layers - 1);
    if (kind < 7) {  // store a few tokens
      std::set<std::pair<PageId, int>> used;
      std::vector<TokenBytes> toks;
      const int n = uni(1, 8);
      for (int i = 0; i < n; ++i) {
        const PageId p = uni(0, c.pages - 1);
        const int t = uni(0, L.page_size - 1);
        if (!used.insert({p, t}).second) continue;
        TokenBytes tb{p, t, {}};
        for (int k = 0; k < L.banks_per_layer; ++k) {
          const BankKind bk = PageLayout::kind_of(k);
          tb.bytes[k] = random_bytes(rng, L.token_bytes(bk));
          ref.store(layer, bk, p, t, tb.bytes[k]);
        }
        toks.push_back(std::move(tb));
      }
      gpu.store(layer, toks);
    } else if (kind < 18) {  // ensure a random selection
      const bool too_big = uni(0, 14) == 0;
      const int distinct = too_big ? std::min<int>(c.pages, c.slots + 1) : uni(1, c.max_distinct);
      std::vector<PageId> chosen(static_cast<std::size_t>(c.pages));
      for (PageId p = 0; p < c.pages; ++p)
        chosen[p] = p;
      std::shuffle(chosen.begin(), chosen.end(), rng);
      chosen.resize(static_cast<std::size_t>(distinct));
      std::vector<PageId> query;
      const int n = uni(distinct, max_query);
      for (int i = 0; i < n; ++i)
        query.push_back(i < distinct     ? chosen[i]
                        : uni(0, 4) == 0 ? kNoPage
                                         : chosen[uni(0, distinct - 1)]);
      std::shuffle(query.begin(), query.end(), rng);
      step += uni(0, 2);  // 0: a second chunk of the same step
      std::vector<CopyOp> rc_copies, gc_copies;
      bool ref_full = false, gpu_full = false;
      EnsureResult rr{}, gr{};
      try {
        rr = ref.ensure(layer, query, step, rc_copies);
      } catch (const CapacityError&) {
        ref_full = true;
      }
      try {
        gr = gpu.ensure(layer, query, step, gc_copies);
      } catch (const CapacityError&) {
        gpu_full = true;
      }
      RC_ASSERT(ref_full == gpu_full);
      if (!ref_full) {
        RC_ASSERT(rr.hits == gr.hits);
        RC_ASSERT(rr.misses == gr.misses);
        RC_ASSERT(rr.lookups == gr.lookups);
        RC_ASSERT(rr.evictions == gr.evictions);
        RC_ASSERT(rc_copies == gc_copies);
        std::set<PageId> selected(query.begin(), query.end());
        selected.erase(kNoPage);
        check_pages(gpu, ref, layer, selected);
      }
      std::vector<SlotId> sop;
      std::vector<PageId> pos;
      std::vector<std::int64_t> lu;
      gpu.download_state(layer, sop, pos, lu);
      const ResidencyState& rs = ref.state(layer);
      RC_ASSERT(sop == rs.slot_of_page());
      RC_ASSERT(pos == rs.page_of_slot());
      RC_ASSERT(lu == rs.last_use());
    } else {  // flush; later ensures rehydrate from the host bank
      ref.flush();
      gpu.flush();
    }
  }
  // Finally every page of every bank: host banks equal; every page rehydrated equal.
  for (int l = 0; l < L.layers; ++l)
    for (int k = 0; k < L.banks_per_layer; ++k)
      for (PageId p = 0; p <= c.pages; ++p) {
        const auto h = ref.host_page(l, PageLayout::kind_of(k), p);
        const auto g = gpu.host_page(l, PageLayout::kind_of(k), p);
        RC_ASSERT(std::equal(h.begin(), h.end(), g.begin(), g.end()));
      }
  RC_ASSERT(gpu.read_counters().bad_stores == 0);
}

TEST(MirrorProps, GpuEqualsFunctionalStore) {
  KVT_REQUIRE_GPU();
  EXPECT_TRUE(rc::check("mirror engine == functional store",
                        [](std::uint64_t seed) { run_sequence(seed); }));
}

}  // namespace
}  // namespace kvtier::cuda
