// The binary form's reader (binary_writer.cpp writes the form; docs/trace-format.md describes
// every byte): frames are read, checked and decompressed one at a time, and each selection is
// rebuilt from the same request and layer's previous one by merging its added ids into the ids
// it kept.
#include <zstd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "traces/format_internal.hpp"
#include "traces/validate.hpp"
#include "traces/varint.hpp"

namespace kvtier::traces::detail {
namespace {

// The reader's previous selection of one (request, layer): ids[0, n), then at least 8 more
// elements that the merge may read past the end (their values never matter).
struct PrevSelection {
  std::vector<std::int32_t> ids;
  std::size_t n = 0;
};
using PrevSelections = std::vector<PrevSelection>;  // [layer]

class BinaryReader final : public TraceReader {
 public:
  explicit BinaryReader(const std::string& path) : path_(path), validator_(Geometry{}) {
    f_.reset(std::fopen(path.c_str(), "rb"));
    if (!f_) throw TraceError("cannot open '" + path + "': " + std::strerror(errno));
    if (std::fseek(f_.get(), 0, SEEK_END) != 0) throw TraceError("cannot seek '" + path + "'");
    file_size_ = static_cast<std::uint64_t>(std::ftell(f_.get()));
    std::rewind(f_.get());
    unsigned char head[16];
    read_exact(head, 16, "the file header");
    if (std::memcmp(head, kFileMagic, sizeof kFileMagic) != 0) {
      fail_at(0, "not a kvtier binary trace (wrong magic)");
    }
    const std::uint32_t version = get_u32(head + 8);
    if (version != kTraceFormatVersion) {
      fail_at(8, "unsupported trace format version " + std::to_string(version) +
                     " (this build reads version " + std::to_string(kTraceFormatVersion) + ")");
    }
    const std::uint32_t len = get_u32(head + 12);
    if (len > kMaxHeaderBytes) fail_at(12, "header length " + std::to_string(len) + " too large");
    std::string json(len, '\0');
    read_exact(reinterpret_cast<unsigned char*>(json.data()), len, "the header JSON");
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(json, ec);
    if (ec) fail_at(16, "header JSON does not parse: " + ec.message());
    header_ = header_from_json(v, path_ + ": header (byte offset 16)");
    header_.version = version;
    layers_ = header_.geometry.qsa_layers();
    validator_ = TraceValidator(header_.geometry);
    dctx_ = ZSTD_createDCtx();
  }
  ~BinaryReader() override {
    if (dctx_) ZSTD_freeDCtx(dctx_);
  }

  const TraceHeader& header() const override { return header_; }
  std::uint64_t records_read() const override { return index_; }
  std::uint64_t bytes_read() const override { return pos_; }

  bool next(Record& out) override {
    if (ended_) return false;
    if (frame_left_ == 0) {
      if (p_ != end_) fail("frame holds " + std::to_string(end_ - p_) + " bytes after its records");
      if (!load_frame()) return false;
    }
    record_start_ = p_;
    if (p_ == end_) fail("frame ends before its records do");
    const std::uint8_t tag = *p_++;
    if (tag == kTagBegin) {
      RequestBegin b;
      b.id = get();
      b.prompt_tokens = get_i64("prompt_tokens");
      b.shared_with = get();
      b.shared_pages = get_i64("shared_pages");
      stash(out);
      out = b;
      check(out);
      prev_[b.id].assign(static_cast<std::size_t>(layers_),
                         PrevSelection{std::vector<std::int32_t>(kPad), 0});
    } else if (tag == kTagEnd) {
      RequestEnd e;
      e.id = get();
      stash(out);
      out = e;
      check(out);
      prev_.erase(e.id);
    } else if (tag == kTagForward) {
      if (!std::holds_alternative<Forward>(out)) out = std::move(spare_);
      decode_forward(std::get<Forward>(out));
      check(out, TraceValidator::IdOrder::ids_ascending);
    } else {
      fail("unknown record tag " + std::to_string(tag));
    }
    --frame_left_;
    ++index_;
    return true;
  }

 private:
  void stash(Record& out) {
    if (auto* f = std::get_if<Forward>(&out)) spare_ = std::move(*f);
  }

  void check(const Record& r, TraceValidator::IdOrder order = TraceValidator::IdOrder::unchecked) {
    const std::string bad = validator_.check(r, order);
    if (!bad.empty()) fail(bad);
  }

  [[noreturn]] void fail_at(std::uint64_t offset, const std::string& what) const {
    throw TraceError(path_ + ": byte offset " + std::to_string(offset) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) const {
    const auto within =
        static_cast<std::uint64_t>((record_start_ ? record_start_ : p_) - raw_.data());
    throw TraceError(path_ + ": record " + std::to_string(index_) + " (frame at byte offset " +
                     std::to_string(frame_offset_) + ", byte " + std::to_string(within) +
                     " of its decoded payload): " + what);
  }

  void read_exact(unsigned char* dst, std::size_t n, const char* what) {
    const std::uint64_t at = pos_;
    if (std::fread(dst, 1, n, f_.get()) != n) {
      fail_at(at, std::string("truncated: the file ends inside ") + what + " (" +
                      std::to_string(file_size_) + " bytes in all)");
    }
    pos_ += n;
  }

  bool load_frame() {
    frame_offset_ = pos_;
    record_start_ = nullptr;
    if (pos_ == file_size_) {
      fail_at(pos_, "truncated: the file ends after record " + std::to_string(index_) +
                        " without the end marker");
    }
    unsigned char magic[4];
    read_exact(magic, 4, "a frame header");
    if (std::memcmp(magic, kEndMagic, 4) == 0) {
      unsigned char n[8];
      read_exact(n, 8, "the end marker");
      const std::uint64_t total = get_u64(n);
      if (total != index_) {
        fail_at(frame_offset_, "end marker counts " + std::to_string(total) + " records but " +
                                   std::to_string(index_) + " were read");
      }
      if (pos_ != file_size_) {
        fail_at(pos_, std::to_string(file_size_ - pos_) + " bytes after the end marker");
      }
      ended_ = true;
      return false;
    }
    if (std::memcmp(magic, kFrameMagic, 4) != 0) fail_at(frame_offset_, "bad frame magic");
    unsigned char h[16];
    read_exact(h, 16, "a frame header");
    const std::uint32_t codec = get_u32(h), raw_size = get_u32(h + 4), stored = get_u32(h + 8),
                        records = get_u32(h + 12);
    if (codec != kCodecRaw && codec != kCodecZstd) {
      fail_at(frame_offset_, "unknown frame codec " + std::to_string(codec));
    }
    if (raw_size > kMaxFrameBytes || records == 0 || records > raw_size) {
      fail_at(frame_offset_, "corrupt frame header (" + std::to_string(records) + " records in " +
                                 std::to_string(raw_size) + " bytes)");
    }
    if (stored > file_size_ - pos_) {
      fail_at(frame_offset_, "truncated: frame of " + std::to_string(stored) +
                                 " bytes but the file has " + std::to_string(file_size_ - pos_) +
                                 " left");
    }
    if (codec == kCodecRaw) {
      if (stored != raw_size) fail_at(frame_offset_, "raw frame sizes disagree");
      raw_.resize(raw_size);
      read_exact(raw_.data(), raw_size, "a frame");
    } else {
      stored_.resize(stored);
      read_exact(stored_.data(), stored, "a frame");
      const unsigned long long content = ZSTD_getFrameContentSize(stored_.data(), stored);
      if (content != raw_size) {
        fail_at(frame_offset_, "corrupt zstd frame (content size does not match the header)");
      }
      raw_.resize(raw_size);
      const std::size_t n =
          ZSTD_decompressDCtx(dctx_, raw_.data(), raw_.size(), stored_.data(), stored);
      if (ZSTD_isError(n) || n != raw_size) {
        fail_at(frame_offset_, std::string("corrupt zstd frame: ") +
                                   (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short output"));
      }
    }
    p_ = raw_.data();
    end_ = p_ + raw_.size();
    frame_left_ = records;
    return true;
  }

  std::uint64_t get() {
    std::uint64_t v;
    if (!varint::get(p_, end_, v)) fail("corrupt or truncated varint");
    return v;
  }
  std::int64_t get_i64(const char* what) {
    const std::uint64_t v = get();
    if (v > static_cast<std::uint64_t>(INT64_MAX)) fail(std::string(what) + " out of range");
    return static_cast<std::int64_t>(v);
  }
  std::uint64_t get_bounded(std::uint64_t limit, const char* what) {
    const std::uint64_t v = get();
    if (v > limit) fail(std::string("corrupt ") + what + " (" + std::to_string(v) + ")");
    return v;
  }

  // Slack kept after every buffer the selection merge reads or writes 8 ids at a time.
  static constexpr std::size_t kPad = 8;

  // Grows `v` (geometrically, so a reused Forward settles) to hold at least `n` elements.
  static void ensure_size(std::vector<std::int32_t>& v, std::size_t n) {
    if (v.size() < n) v.resize(std::max(n, v.size() + v.size() / 2));
  }

  void decode_forward(Forward& f) {
    const auto left = static_cast<std::uint64_t>(end_ - p_);
    // Each row takes at least 4 bytes and each selection 2: bounds before any allocation.
    const std::size_t rows = get_bounded(left / 4, "row count");
    if (rows * static_cast<std::uint64_t>(layers_) * 2 > left) fail("truncated forward");
    f.rows.resize(rows);
    f.layers = layers_;
    rowsel_.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      ForwardRow& row = f.rows[r];
      row.request = get();
      row.position = get_i64("position");
      row.count = static_cast<std::int32_t>(get_bounded(INT32_MAX, "row count of tokens"));
      if (p_ == end_) fail("truncated forward row");
      const std::uint8_t kind = *p_++;
      if (kind > 1) fail("bad row kind " + std::to_string(kind));
      row.kind = kind == 1 ? RowKind::decode : RowKind::prefill;
      auto it = prev_.find(row.request);
      if (it == prev_.end()) {
        fail("row refers to request " + std::to_string(row.request) + ", which is not open");
      }
      rowsel_[r] = &it->second;
    }
    f.offsets.resize(rows * static_cast<std::size_t>(layers_) + 1);
    f.offsets[0] = 0;
    std::size_t n = 0;
    for (int l = 0; l < layers_; ++l) {
      for (std::size_t r = 0; r < rows; ++r) {
        PrevSelection& prev = (*rowsel_[r])[static_cast<std::size_t>(l)];
        const std::size_t np = prev.n;
        const std::size_t nrem = get_bounded(np, "count of removed ids");
        const std::size_t nadd =
            get_bounded(static_cast<std::uint64_t>(end_ - p_), "count of added ids");
        const std::size_t count = np - nrem + nadd;
        ensure_size(kept_, np + 2 * kPad);
        ensure_size(f.ids, n + np + nadd + kPad);
        std::int32_t* out = f.ids.data() + n;
        // A varint takes at most kMaxBytes: when that many are left for every id of this
        // selection, its varints are read without a bounds check per byte (all but the last
        // few selections of a frame).
        if ((nrem + nadd) * varint::kMaxBytes <= static_cast<std::size_t>(end_ - p_)) {
          apply_delta<false>(prev, nrem, nadd, out);
        } else {
          apply_delta<true>(prev, nrem, nadd, out);
        }
        ensure_size(prev.ids, count + kPad);
        std::memcpy(prev.ids.data(), out, count * sizeof(std::int32_t));
        prev.n = count;
        n += count;
        f.offsets[static_cast<std::size_t>(l) * rows + r + 1] = static_cast<std::int64_t>(n);
      }
    }
    f.ids.resize(n);
  }

  // Writes the selection that `prev` becomes after the delta at p_ (`nrem` removed indices,
  // `nadd` added ids) to out[0, count), and may write kPad ids past it. The result is
  // strictly ascending by construction: `prev` was, the removed ids leave it so, the added
  // ids are ascending gaps, and an added id that `prev` keeps is rejected here; so the
  // validator only checks its bounds (TraceValidator::IdOrder::ids_ascending).
  template <bool kChecked>
  void apply_delta(const PrevSelection& prev, std::size_t nrem, std::size_t nadd,
                   std::int32_t* out) {
    const std::uint8_t* p = p_;
    const auto read = [&](std::uint64_t& v) {
      const bool ok = kChecked ? varint::get(p, end_, v) : varint::get_unchecked(p, v);
      if (!ok) {
        p_ = p;
        fail("corrupt or truncated varint");
      }
    };
    // 1. kept = prev without the removed indices, copied in runs of 8 (the buffers have
    //    kPad slack), then kPad copies of INT32_MAX so the merge below stops at its end.
    const std::size_t np = prev.n;
    const std::int32_t* pp = prev.ids.data();
    std::int32_t* kept = kept_.data();
    std::size_t r = 0, w = 0;
    std::uint64_t idx = ~std::uint64_t{0};
    for (std::size_t k = 0; k < nrem; ++k) {
      std::uint64_t gap;
      read(gap);
      if (gap >= np || (idx += gap + 1) >= np) {  // gap < np: no wrap-around
        p_ = p;
        fail("removed index beyond the previous selection");
      }
      const std::size_t run = static_cast<std::size_t>(idx) - r;
      std::size_t j = 0;
      do {
        copy8(kept + w + j, pp + r + j);
        j += 8;
      } while (j < run);
      w += run;
      r = static_cast<std::size_t>(idx) + 1;
    }
    std::memcpy(kept + w, pp + r, (np - r) * sizeof(std::int32_t));
    const std::size_t nk = w + (np - r);
    std::fill(kept + nk, kept + nk + kPad, INT32_MAX);
    // 2. Merge the added ids in: for each, copy the kept ids below it and then it.
    std::size_t ki = 0;
    std::uint64_t id = ~std::uint64_t{0};
    for (std::size_t t = 0; t < nadd; ++t) {
      std::uint64_t gap;
      read(gap);
      if (gap > INT32_MAX || (id += gap + 1) > INT32_MAX) {  // id <= INT32_MAX: no wrap
        p_ = p;
        fail("block id out of range");
      }
      const auto x = static_cast<std::int32_t>(id);
#if defined(__SSE2__)
      // kept is ascending, so the ids below x are a prefix of the next 8: their count is
      // the number of trailing ones of the comparison mask.
      const __m128i key = _mm_set1_epi32(x);
      for (;;) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kept + ki));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kept + ki + 4));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), a);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4), b);
        const unsigned below =
            static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(key, a)))) |
            static_cast<unsigned>(_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(key, b)))) << 4;
        const auto c = static_cast<std::size_t>(__builtin_ctz(~below));
        out += c;
        ki += c;
        if (c < 8) break;
      }
#else
      while (kept[ki] < x)
        *out++ = kept[ki++];
#endif
      if (ki < nk && kept[ki] == x) {
        p_ = p;
        fail("selection adds block " + std::to_string(x) +
             ", which the previous selection keeps (not strictly ascending)");
      }
      *out++ = x;
    }
    std::memcpy(out, kept + ki, (nk - ki) * sizeof(std::int32_t));
    p_ = p;
  }

  static void copy8(std::int32_t* dst, const std::int32_t* src) {
    std::memcpy(dst, src, 8 * sizeof(std::int32_t));
  }

  std::string path_;
  FilePtr f_;
  std::uint64_t file_size_ = 0;
  std::uint64_t pos_ = 0;
  std::uint64_t frame_offset_ = 0;
  TraceHeader header_;
  int layers_ = 0;
  TraceValidator validator_;
  ZSTD_DCtx* dctx_ = nullptr;
  std::vector<unsigned char> stored_, raw_;
  const std::uint8_t* p_ = nullptr;
  const std::uint8_t* end_ = nullptr;
  const std::uint8_t* record_start_ = nullptr;
  std::uint32_t frame_left_ = 0;
  std::uint64_t index_ = 0;
  bool ended_ = false;
  std::unordered_map<RequestId, PrevSelections> prev_;
  std::vector<PrevSelections*> rowsel_;
  std::vector<std::int32_t> kept_;  // scratch: the previous selection less the removed ids
  Forward spare_;
};

}  // namespace

std::unique_ptr<TraceReader> open_binary_reader(const std::string& path) {
  return std::make_unique<BinaryReader>(path);
}

}  // namespace kvtier::traces::detail
