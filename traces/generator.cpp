#include "traces/generator.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include "model/config_error.hpp"
#include "traces/split_mix64.hpp"

namespace kvtier::traces {
namespace {

using Rng = SplitMix64;

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  Rng r{a ^ (b * 0xd6e8feb86659fd93ull)};
  return r.next();
}

}  // namespace

void GenParams::validate() const {
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw ConfigError("generator: " + what);
  };
  need(requests >= 1, "requests must be >= 1");
  need(concurrent >= 1, "concurrent must be >= 1");
  need(prompt_min >= 1 && prompt_max >= prompt_min, "need 1 <= prompt_min <= prompt_max");
  need(decode_min >= 1 && decode_max >= decode_min, "need 1 <= decode_min <= decode_max");
  need(prefill_chunk >= 1 && prefill_chunk <= INT32_MAX,
       "prefill_chunk must be 1.." + std::to_string(INT32_MAX) + " (a row's 32-bit count)");
  need(prefill_samples >= 1, "prefill_samples must be >= 1");
  need(shared_prefix >= 0, "shared_prefix must be >= 0");
  need(fill_depth >= 0, "fill_depth must be >= 0");
  need(fill_depth == 0 || shared_prefix == 0, "fill_depth and shared_prefix: not both");
  need(step_overlap >= 0 && step_overlap <= 1, "step_overlap must be in [0, 1]");
  need(recent_frac >= 0 && layer_coupling >= 0 && recent_frac + layer_coupling <= 1,
       "recent_frac and layer_coupling must be >= 0 and sum to at most 1");
  need(layer_follow >= 0 && layer_follow <= 1, "layer_follow must be in [0, 1]");
  need(recent_window >= 1, "recent_window must be >= 1");
  need(sinks_always >= 0 && sinks_likely >= sinks_always, "need 0 <= sinks_always <= sinks_likely");
  need(sinks_likely_p >= 0 && sinks_likely_p <= 1, "sinks_likely_p must be in [0, 1]");
  need(newest_p >= 0 && newest_p <= 1, "newest_p must be in [0, 1]");
  need(zipf_s >= 0 && zipf_s <= 4, "zipf_s must be in [0, 4]");
}

std::vector<std::string> gen_preset_names() {
  return {"dsv4-flash", "sparse-trained", "dense-topk", "shared-indexer"};
}

GenParams gen_preset(const std::string& name) {
  GenParams p;  // the defaults are "dsv4-flash"
  if (name == "dsv4-flash") {
  } else if (name == "sparse-trained") {
    p.step_overlap = 0.85;
  } else if (name == "dense-topk") {
    p.step_overlap = 0.58;
  } else if (name == "shared-indexer") {
    p.recent_frac = 0.05;
    p.layer_coupling = 0.9;
    p.layer_follow = 0.5;
  } else {
    std::string known;
    for (const auto& n : gen_preset_names())
      known += (known.empty() ? "" : ", ") + n;
    throw ConfigError("unknown generator preset '" + name + "' (known: " + known + ")");
  }
  return p;
}

// One (request, layer)'s evolving selection.
struct LayerState {
  Rng rng{0};
  std::vector<std::int32_t> perm;    // popularity rank -> block
  std::vector<std::int32_t> sel;     // current selection, ascending
  std::vector<std::int32_t> body;    // scratch: the non-special part
  std::vector<std::uint8_t> in;      // [blocks] 1 when in body
  std::vector<std::int32_t> recent;  // ring of recently dropped blocks
  std::size_t recent_pos = 0;
  bool started = false;
  std::vector<std::int32_t> scratch;  // sort_blocks
  double rank_span = -1;              // power_rank's log(size + 1) or (size + 1)^(1 - s) - 1
};

struct TraceGenerator::Request {
  RequestId id = 0;
  std::int64_t prompt = 0;
  std::int64_t decode = 0;
  std::int64_t pos = 0;  // next token position
  std::vector<LayerState> layers;
  std::vector<std::int32_t> tmp;  // scratch: a union of selections
  // [forward of the window] the layer above's selection at that forward (its last sample's)
  std::vector<std::vector<std::int32_t>> upper, next_upper;
};

// With threads: one thread builds windows of forwards ahead (at most kBatches waiting) while
// the caller takes and writes the records of the previous ones; an exception it meets is
// thrown by next() once the records before it are taken.
struct TraceGenerator::Ahead {
  static constexpr std::size_t kBatches = 2;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::deque<Record>> batches;
  bool done = false, stop = false;
  std::exception_ptr error;
  std::thread thread;
};

namespace {

struct Step {
  const GenParams& p;
  int topk;

  // Advances `st` to a query whose visible blocks are [0, n); `keep` is the chance a body
  // block survives; `upper` is the previous layer's selection at this step (may be empty).
  void advance(LayerState& st, std::int64_t n, double keep,
               const std::vector<std::int32_t>& upper) const {
    st.sel.clear();
    if (n <= topk) {  // the whole context fits in the budget: dense
      // The body is every non-sink block, so the first sparse step keeps most of them.
      st.body.clear();
      for (std::int32_t b = 0; b < n; ++b) {
        st.sel.push_back(b);
        const bool body = b >= p.sinks_likely;
        st.in[b] = body ? 1 : 0;
        if (body) st.body.push_back(b);
      }
      st.started = true;
      return;
    }
    const auto newest = static_cast<std::int32_t>(n - 1);
    // Specials: sinks and the newest block (never more than the budget).
    const bool with_newest = st.rng.uniform() < p.newest_p;
    const std::size_t special_cap = static_cast<std::size_t>(topk) - (with_newest ? 1 : 0);
    for (std::int32_t b = 0; b < p.sinks_likely && b < newest && st.sel.size() < special_cap; ++b) {
      if (b < p.sinks_always || st.rng.uniform() < p.sinks_likely_p) st.sel.push_back(b);
    }
    auto special = [&](std::int32_t b) { return b < p.sinks_likely || b == newest; };
    const std::int64_t lo = std::min<std::int64_t>(p.sinks_likely, newest);
    const auto available = static_cast<std::size_t>(newest - lo);  // non-special blocks
    const std::size_t m =
        std::min(static_cast<std::size_t>(topk) - st.sel.size() - (with_newest ? 1 : 0), available);

    // Survivors of the previous body (when coming from a dense step, the whole previous
    // selection is the body).
    std::vector<std::int32_t>& body = st.body;
    std::size_t w = 0;
    for (std::size_t i = 0; i < body.size(); ++i) {
      const std::int32_t b = body[i];
      const bool follows =
          p.layer_follow == 0 || upper.empty() || std::binary_search(upper.begin(), upper.end(), b);
      const double k = follows ? keep : keep * (1 - p.layer_follow);
      if (!special(b) && st.rng.uniform() < k) {
        body[w++] = b;
      } else {
        st.in[b] = 0;
        push_recent(st, b);
      }
    }
    body.resize(w);
    while (body.size() > m) {  // more specials than last step: drop at random
      const std::uint32_t i = st.rng.below(body.size());
      st.in[body[i]] = 0;
      push_recent(st, body[i]);
      body[i] = body.back();
      body.pop_back();
    }
    while (body.size() < m) {
      std::int32_t c = -1;
      for (int tries = 0; tries < 32 && c < 0; ++tries) {
        const double u = st.rng.uniform();
        std::int64_t cand;
        if (u < p.layer_coupling && !upper.empty()) {
          cand = upper[st.rng.below(upper.size())];
        } else if (u < p.layer_coupling + p.recent_frac && !st.recent.empty()) {
          cand = st.recent[st.rng.below(st.recent.size())];
        } else {
          cand = st.perm[power_rank(st)];
        }
        if (cand < n && !special(static_cast<std::int32_t>(cand)) && !st.in[cand]) {
          c = static_cast<std::int32_t>(cand);
        }
      }
      while (c < 0) {  // rare: uniform over the non-special blocks
        const auto cand = static_cast<std::int32_t>(lo + st.rng.below(available));
        if (!st.in[cand]) c = cand;
      }
      st.in[c] = 1;
      body.push_back(c);
    }
    st.sel.insert(st.sel.end(), body.begin(), body.end());
    if (with_newest) st.sel.push_back(newest);
    sort_blocks(st.sel, st.scratch, n);
    st.started = true;
  }

  // Ascending order of distinct blocks in [0, n): an LSD radix sort, 8 bits a pass (the
  // selection is a few hundred blocks of a context of up to a million; a comparison sort
  // of it was a sixth of the generator's time).
  static void sort_blocks(std::vector<std::int32_t>& v, std::vector<std::int32_t>& tmp,
                          std::int64_t n) {
    if (v.size() < 64) {
      std::sort(v.begin(), v.end());
      return;
    }
    tmp.resize(v.size());
    for (int shift = 0; shift < 32 && (std::int64_t{1} << shift) < n; shift += 8) {
      std::size_t count[257] = {};
      for (std::int32_t x : v)
        ++count[((static_cast<std::uint32_t>(x) >> shift) & 0xff) + 1];
      for (int b = 0; b < 256; ++b)
        count[b + 1] += count[b];
      for (std::int32_t x : v)
        tmp[count[(static_cast<std::uint32_t>(x) >> shift) & 0xff]++] = x;
      v.swap(tmp);
    }
  }

  void push_recent(LayerState& st, std::int32_t b) const {
    const std::size_t cap = static_cast<std::size_t>(p.recent_window) *
                            static_cast<std::size_t>(std::max(1.0, (1 - p.step_overlap) * topk));
    if (st.recent.size() < cap) {
      st.recent.push_back(b);
    } else {
      st.recent[st.recent_pos] = b;
      if (++st.recent_pos == cap) st.recent_pos = 0;  // (pos + 1) % cap without a division
    }
  }

  // A rank in [0, size) with P(rank r) ~ (r + 1)^-s (continuous power law, inverse CDF),
  // size = the state's perm. The part that depends on the size alone (log or power of
  // size + 1) is computed once per state: the same values, one pow a draw instead of two.
  std::size_t power_rank(LayerState& st) const {
    const std::size_t size = st.perm.size();
    const bool log_form = std::abs(p.zipf_s - 1) < 1e-9;
    const double e = 1 - p.zipf_s;
    if (st.rank_span < 0) {
      const double n1 = static_cast<double>(size) + 1;
      st.rank_span = log_form ? std::log(n1) : std::pow(n1, e) - 1;
    }
    const double u = st.rng.uniform();
    const double x = log_form ? std::exp(u * st.rank_span) : std::pow(st.rank_span * u + 1, 1 / e);
    const auto r = static_cast<std::size_t>(x) - 1;
    return std::min(r, size - 1);
  }
};

}  // namespace

TraceGenerator::TraceGenerator(const Geometry& g, const GenParams& p, int threads)
    : g_(g),
      p_(p),
      sched_state_(mix(p.seed, 0x5eed)),
      threads_(threads > 0 ? threads
                           : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {
  g_.validate();
  p_.validate();
  // Before anything is allocated: a request's blocks are sized by its whole context.
  const std::int64_t max_context = g_.max_context(true);
  if (p_.prompt_max > max_context - p_.decode_max) {  // no overflow: both are >= 1
    throw ConfigError("generator: prompt_max " + std::to_string(p_.prompt_max) + " + decode_max " +
                      std::to_string(p_.decode_max) +
                      " tokens (--prompt/--prompt-max, --decode/--decode-max) is beyond the "
                      "geometry's largest context, " +
                      std::to_string(max_context) + " tokens (rope_max_positions x yarn_factor)");
  }
  if (p_.fill_depth > max_context - p_.decode_max - p_.prompt_max) {
    throw ConfigError("generator: fill_depth " + std::to_string(p_.fill_depth) + " + prompt_max " +
                      std::to_string(p_.prompt_max) + " + decode_max " +
                      std::to_string(p_.decode_max) +
                      " tokens (--fill-depth, --prompt/--prompt-max, --decode/--decode-max) is "
                      "beyond the geometry's largest context, " +
                      std::to_string(max_context) + " tokens (rope_max_positions x yarn_factor)");
  }
}

TraceGenerator::~TraceGenerator() {
  if (!ahead_) return;
  {
    std::lock_guard<std::mutex> lock(ahead_->mu);
    ahead_->stop = true;
  }
  ahead_->cv.notify_all();
  ahead_->thread.join();
}

void TraceGenerator::start_requests(std::deque<Record>& out) {
  Rng sched{sched_state_};
  while (static_cast<int>(active_.size()) < p_.concurrent && next_id_ <= p_.requests) {
    auto r = std::make_unique<Request>();
    r->id = static_cast<RequestId>(next_id_++);
    const double lp = std::log(static_cast<double>(p_.prompt_min)) +
                      sched.uniform() * (std::log(static_cast<double>(p_.prompt_max)) -
                                         std::log(static_cast<double>(p_.prompt_min)));
    r->prompt = std::clamp(static_cast<std::int64_t>(std::exp(lp)), p_.prompt_min, p_.prompt_max);
    r->decode = p_.decode_min + static_cast<std::int64_t>(sched.below(
                                    static_cast<std::uint64_t>(p_.decode_max - p_.decode_min + 1)));
    // At depth: the filled tokens count as prompt the request never prefills (as a runner's
    // recording at --fill-depth begins), so positions, blocks and decode follow on from them.
    r->prompt += p_.fill_depth;
    r->pos = p_.fill_depth;
    RequestBegin b{r->id, r->prompt, 0, 0};
    if (p_.shared_prefix > 0) {
      // The prefix cache holds the prefix only while a request holding it is open: share with
      // the lowest-id open request whose prompt covers it; with none open, this request
      // computes the prefix itself and later ones share with it.
      const std::int64_t pages = std::min(p_.shared_prefix, r->prompt) / g_.page_size;
      for (const auto& o : active_) {
        if (pages > 0 && o->prompt >= pages * g_.page_size) {
          b.shared_with = o->id;
          b.shared_pages = pages;
          r->pos = pages * g_.page_size;
          break;
        }
      }
    }
    const std::int64_t blocks = (r->prompt + r->decode) / g_.compress_ratio + 1;
    r->layers.resize(static_cast<std::size_t>(g_.qsa_layers()));
    for (std::size_t l = 0; l < r->layers.size(); ++l) {
      LayerState& st = r->layers[l];
      st.rng.s = mix(mix(p_.seed, r->id), l + 1);
      st.perm.resize(static_cast<std::size_t>(blocks));
      std::iota(st.perm.begin(), st.perm.end(), 0);
      for (std::size_t i = st.perm.size(); i > 1; --i) {
        std::swap(st.perm[i - 1], st.perm[st.rng.below(i)]);
      }
      st.in.assign(static_cast<std::size_t>(blocks), 0);
    }
    out.emplace_back(b);
    active_.push_back(std::move(r));
  }
  sched_state_ = sched.s;
}

namespace {

// Forwards left to a request at `pos`: its prefill chunks, then one per decode token.
std::int64_t forwards_left(std::int64_t pos, std::int64_t prompt, std::int64_t decode,
                           std::int64_t chunk) {
  const std::int64_t prefill = pos < prompt ? (prompt - pos + chunk - 1) / chunk : 0;
  return prefill + (prompt + decode - std::max(pos, prompt));
}

}  // namespace

// Builds the next forwards at once: as many as fit about kWindowBytes of selections (at
// most kMaxWindow), while the same requests run (until the first of them ends). Each (request,
// layer) owns its random stream and a layer reads only the layer above of the same request at the
// same forward, so the window is built request by request, layer by layer, forward by forward -- a
// layer's state (a context's worth of blocks) stays in cache for the whole window instead of being
// fetched again at every forward -- and requests are shared out over threads. The records are
// exactly those of building one forward at a time.
void TraceGenerator::build_window(std::deque<Record>& records) {
  constexpr std::int64_t kWindowBytes = std::int64_t{48} << 20, kMaxWindow = 256;
  const int layers = g_.qsa_layers();
  const std::size_t rows = active_.size();
  // A forward's selections: a decode row selects block_topk blocks a layer, a prefill row up
  // to that many per sampled token.
  std::int64_t forward_ids = 0;
  for (const auto& r : active_)
    forward_ids += r->pos < r->prompt ? std::int64_t{p_.prefill_samples} : 1;
  forward_ids *= std::int64_t{g_.block_topk()} * layers;
  std::int64_t window = std::clamp<std::int64_t>(
      kWindowBytes / std::max<std::int64_t>(1, forward_ids * 4), 1, kMaxWindow);
  for (const auto& r : active_)
    window = std::min(window, forwards_left(r->pos, r->prompt, r->decode, p_.prefill_chunk));
  const auto k = static_cast<std::size_t>(window);
  // [forward][layer][row] a row's selection: the union of its sampled tokens'
  std::vector<std::vector<std::int32_t>> sels(k * static_cast<std::size_t>(layers) * rows);
  auto sel_of = [&](std::size_t f, int l, std::size_t ri) -> std::vector<std::int32_t>& {
    return sels[(f * static_cast<std::size_t>(layers) + static_cast<std::size_t>(l)) * rows + ri];
  };
  const Step step{p_, g_.block_topk()};
  auto build_request = [&](std::size_t ri) {
    Request& r = *active_[ri];
    r.upper.assign(k, {});
    r.next_upper.resize(k);
    for (int l = 0; l < layers; ++l) {
      LayerState& st = r.layers[static_cast<std::size_t>(l)];
      std::int64_t pos = r.pos;
      for (std::size_t f = 0; f < k; ++f) {
        const bool prefill = pos < r.prompt;
        const std::int64_t count = prefill ? std::min(p_.prefill_chunk, r.prompt - pos) : 1;
        // Query tokens whose selections are simulated: the decode token, or prefill_samples
        // tokens spread over the chunk ending with its last token (the union is the row's).
        const int samples =
            prefill ? static_cast<int>(std::min<std::int64_t>(p_.prefill_samples, count)) : 1;
        std::vector<std::int32_t>& out = sel_of(f, l, ri);
        std::int64_t last_q = pos - 1;
        for (int s = 0; s < samples; ++s) {
          const std::int64_t q = pos + (static_cast<std::int64_t>(s) + 1) * count / samples - 1;
          const std::int64_t stride = q - last_q;
          last_q = q;
          const double keep =
              st.started ? std::pow(p_.step_overlap, static_cast<double>(stride)) : 0;
          step.advance(st, (q + 1) / g_.compress_ratio, keep, r.upper[f]);
          if (s == 0) {
            out = st.sel;
          } else {
            r.tmp.clear();
            std::set_union(out.begin(), out.end(), st.sel.begin(), st.sel.end(),
                           std::back_inserter(r.tmp));
            out.swap(r.tmp);
          }
        }
        // The next layer's `upper` at this forward: this layer after its last sample (for a
        // decode row, exactly this step's selection of the layer above).
        if (l + 1 < layers) r.next_upper[f] = st.sel;
        pos += count;
      }
      r.upper.swap(r.next_upper);
    }
  };
  const std::size_t workers = std::min<std::size_t>(static_cast<std::size_t>(threads_), rows);
  if (workers <= 1) {
    for (std::size_t ri = 0; ri < rows; ++ri)
      build_request(ri);
  } else {
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < workers; ++t) {
      pool.emplace_back([&, t] {
        for (std::size_t ri = t; ri < rows; ri += workers)
          build_request(ri);
      });
    }
    for (auto& th : pool)
      th.join();
  }
  for (std::size_t f = 0; f < k; ++f) {
    Forward fw;
    fw.layers = layers;
    for (const auto& r : active_) {
      ForwardRow row;
      row.request = r->id;
      row.position = r->pos;
      if (r->pos < r->prompt) {
        row.kind = RowKind::prefill;
        row.count = static_cast<std::int32_t>(std::min(p_.prefill_chunk, r->prompt - r->pos));
      }
      fw.rows.push_back(row);
      r->pos += row.count;
    }
    fw.offsets.assign(1, 0);
    for (int l = 0; l < layers; ++l) {
      for (std::size_t ri = 0; ri < rows; ++ri) {
        const auto& s = sel_of(f, l, ri);
        fw.ids.insert(fw.ids.end(), s.begin(), s.end());
        fw.offsets.push_back(static_cast<std::int64_t>(fw.ids.size()));
      }
    }
    records.emplace_back(std::move(fw));
    ++forwards_;
  }
  std::vector<std::unique_ptr<Request>> still;
  for (auto& r : active_) {
    if (r->pos >= r->prompt + r->decode) {
      records.emplace_back(RequestEnd{r->id});
    } else {
      still.push_back(std::move(r));
    }
  }
  active_.swap(still);
}

bool TraceGenerator::produce(std::deque<Record>& out) {
  start_requests(out);
  if (active_.empty()) return false;
  build_window(out);
  return true;
}

bool TraceGenerator::next(Record& out) {
  if (threads_ > 1 && !ahead_) {
    ahead_ = std::make_unique<Ahead>();
    ahead_->thread = std::thread([this] {
      Ahead& a = *ahead_;
      try {
        for (;;) {
          {
            std::unique_lock<std::mutex> lock(a.mu);
            a.cv.wait(lock, [&] { return a.stop || a.batches.size() < Ahead::kBatches; });
            if (a.stop) break;
          }
          std::deque<Record> batch;
          if (!produce(batch)) break;
          std::lock_guard<std::mutex> lock(a.mu);
          a.batches.push_back(std::move(batch));
          a.cv.notify_all();
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(a.mu);
        a.error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(a.mu);
      a.done = true;
      a.cv.notify_all();
    });
  }
  if (ahead_) {
    if (pending_.empty()) {
      Ahead& a = *ahead_;
      std::unique_lock<std::mutex> lock(a.mu);
      a.cv.wait(lock, [&] { return !a.batches.empty() || a.done; });
      if (a.batches.empty()) {
        if (a.error) std::rethrow_exception(a.error);
        return false;
      }
      pending_ = std::move(a.batches.front());
      a.batches.pop_front();
      a.cv.notify_all();
    }
  } else if (pending_.empty() && !produce(pending_)) {
    return false;
  }
  out = std::move(pending_.front());
  pending_.pop_front();
  return true;
}

}  // namespace kvtier::traces
