#include "traces/generator.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <string>

#include "model/config_error.hpp"

namespace kvtier::traces {
namespace {

// SplitMix64: small, fast and fully specified, so traces are identical on every platform
// (std:: distributions are not).
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // In [0, n), n < 2^32.
  std::uint32_t below(std::uint64_t n) {
    return static_cast<std::uint32_t>(((next() >> 32) * n) >> 32);
  }
};

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
};

struct TraceGenerator::Request {
  RequestId id = 0;
  std::int64_t prompt = 0;
  std::int64_t decode = 0;
  std::int64_t pos = 0;  // next token position
  std::vector<LayerState> layers;
  std::vector<std::int32_t> row_sel;  // scratch: a row's (union) selection
  std::vector<std::int32_t> tmp;
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
          cand = st.perm[power_rank(st.rng, st.perm.size())];
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
    std::sort(st.sel.begin(), st.sel.end());
    st.started = true;
  }

  void push_recent(LayerState& st, std::int32_t b) const {
    const std::size_t cap = static_cast<std::size_t>(p.recent_window) *
                            static_cast<std::size_t>(std::max(1.0, (1 - p.step_overlap) * topk));
    if (st.recent.size() < cap) {
      st.recent.push_back(b);
    } else {
      st.recent[st.recent_pos] = b;
      st.recent_pos = (st.recent_pos + 1) % cap;
    }
  }

  // A rank in [0, size) with P(rank r) ~ (r + 1)^-s (continuous power law, inverse CDF).
  std::size_t power_rank(Rng& rng, std::size_t size) const {
    const double u = rng.uniform();
    const double n1 = static_cast<double>(size) + 1;
    double x;
    if (std::abs(p.zipf_s - 1) < 1e-9) {
      x = std::exp(u * std::log(n1));
    } else {
      const double e = 1 - p.zipf_s;
      x = std::pow((std::pow(n1, e) - 1) * u + 1, 1 / e);
    }
    const auto r = static_cast<std::size_t>(x) - 1;
    return std::min(r, size - 1);
  }
};

}  // namespace

TraceGenerator::TraceGenerator(const Geometry& g, const GenParams& p)
    : g_(g), p_(p), sched_state_(mix(p.seed, 0x5eed)) {
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
}

TraceGenerator::~TraceGenerator() = default;

void TraceGenerator::start_requests() {
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
    pending_.emplace_back(b);
    active_.push_back(std::move(r));
  }
  sched_state_ = sched.s;
}

void TraceGenerator::build_forward() {
  const Step step{p_, g_.block_topk()};
  Forward f;
  const int layers = g_.qsa_layers();
  f.layers = layers;
  std::vector<std::vector<std::int32_t>> sels(active_.size() * static_cast<std::size_t>(layers));
  for (std::size_t ri = 0; ri < active_.size(); ++ri) {
    Request& r = *active_[ri];
    ForwardRow row;
    row.request = r.id;
    row.position = r.pos;
    if (r.pos < r.prompt) {
      row.kind = RowKind::prefill;
      row.count = static_cast<std::int32_t>(std::min(p_.prefill_chunk, r.prompt - r.pos));
    }
    f.rows.push_back(row);
    // Query tokens whose selections are simulated: the decode token, or prefill_samples
    // tokens spread over the chunk ending with its last token (the union is the row's).
    const int samples = row.kind == RowKind::decode ? 1 : std::min(p_.prefill_samples, row.count);
    const std::vector<std::int32_t> none;
    for (int l = 0; l < layers; ++l) {
      LayerState& st = r.layers[static_cast<std::size_t>(l)];
      std::vector<std::int32_t>& out = sels[static_cast<std::size_t>(l) * active_.size() + ri];
      std::int64_t last_q = r.pos - 1;
      for (int s = 0; s < samples; ++s) {
        const std::int64_t q = r.pos + (static_cast<std::int64_t>(s) + 1) * row.count / samples - 1;
        const std::int64_t stride = q - last_q;
        last_q = q;
        const double keep = st.started ? std::pow(p_.step_overlap, static_cast<double>(stride)) : 0;
        const auto& upper = l > 0 ? r.layers[static_cast<std::size_t>(l) - 1].sel : none;
        step.advance(st, (q + 1) / g_.compress_ratio, keep, upper);
        if (s == 0) {
          out = st.sel;
        } else {
          r.tmp.clear();
          std::set_union(out.begin(), out.end(), st.sel.begin(), st.sel.end(),
                         std::back_inserter(r.tmp));
          out.swap(r.tmp);
        }
      }
    }
  }
  // Note: layer l's `upper` above is layer l-1's state after its *last* sample, which for a
  // decode row is exactly this step's selection of the layer above.
  f.offsets.assign(1, 0);
  for (const auto& s : sels) {
    f.ids.insert(f.ids.end(), s.begin(), s.end());
    f.offsets.push_back(static_cast<std::int64_t>(f.ids.size()));
  }
  pending_.emplace_back(std::move(f));
  ++forwards_;
  for (auto& r : active_)
    r->pos += r->pos < r->prompt ? std::min(p_.prefill_chunk, r->prompt - r->pos) : 1;
  std::vector<std::unique_ptr<Request>> still;
  for (auto& r : active_) {
    if (r->pos >= r->prompt + r->decode) {
      pending_.emplace_back(RequestEnd{r->id});
    } else {
      still.push_back(std::move(r));
    }
  }
  active_.swap(still);
}

bool TraceGenerator::next(Record& out) {
  if (pending_.empty()) {
    start_requests();
    if (active_.empty()) return false;
    build_forward();
  }
  out = std::move(pending_.front());
  pending_.pop_front();
  return true;
}

}  // namespace kvtier::traces
