// The binary form's writer: a file header, then frames of records (zstd or raw), then an end
// marker. A selection is coded against the same request and layer's previous selection: the
// indices (in the previous selection) of the ids it dropped and the ids it added, both as gaps
// in LEB128 varints. docs/trace-format.md describes every byte; binary_reader.cpp reads them.
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "traces/format_internal.hpp"
#include "traces/validate.hpp"
#include "traces/varint.hpp"

namespace kvtier::traces::detail {
namespace {

using Selections = std::vector<std::vector<std::int32_t>>;  // [layer] previous selection

class BinaryWriter final : public TraceWriter {
 public:
  BinaryWriter(const std::string& path, const TraceHeader& h, int level, std::size_t frame_bytes)
      : path_(path),
        layers_(h.geometry.qsa_layers()),
        validator_(h.geometry),
        level_(level),
        frame_bytes_(frame_bytes) {
    f_.reset(std::fopen(path.c_str(), "wb"));
    if (!f_) throw TraceError("cannot create '" + path + "': " + std::strerror(errno));
    std::string head(kFileMagic, sizeof kFileMagic);
    put_u32(head, h.version);
    const std::string json = boost::json::serialize(header_to_json(h));
    put_u32(head, static_cast<std::uint32_t>(json.size()));
    head += json;
    put(head);
    if (level_ > 0) {
      cctx_ = ZSTD_createCCtx();
      ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
      ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
    }
  }
  ~BinaryWriter() override {
    if (cctx_) ZSTD_freeCCtx(cctx_);
  }

  void write(const Record& r) override {
    if (closed_) throw TraceError("write to closed trace '" + path_ + "'");
    const std::string bad = validator_.check(r);
    if (!bad.empty()) throw TraceError("record " + std::to_string(total_) + ": " + bad);
    if (const auto* b = std::get_if<RequestBegin>(&r)) {
      raw_.push_back(static_cast<char>(kTagBegin));
      varint::put(raw_, b->id);
      varint::put(raw_, static_cast<std::uint64_t>(b->prompt_tokens));
      varint::put(raw_, b->shared_with);
      varint::put(raw_, static_cast<std::uint64_t>(b->shared_pages));
      prev_[b->id].assign(static_cast<std::size_t>(layers_), {});
    } else if (const auto* e = std::get_if<RequestEnd>(&r)) {
      raw_.push_back(static_cast<char>(kTagEnd));
      varint::put(raw_, e->id);
      prev_.erase(e->id);
    } else {
      encode_forward(std::get<Forward>(r));
    }
    ++total_;
    ++frame_records_;
    if (raw_.size() >= frame_bytes_) flush_frame();
  }

  void close() override {
    if (closed_) return;
    flush_frame();
    std::string end(kEndMagic, sizeof kEndMagic);
    put_u64(end, total_);
    put(end);
    if (std::fflush(f_.get()) != 0) throw TraceError("cannot write '" + path_ + "'");
    f_.reset();
    closed_ = true;
  }

 private:
  void encode_forward(const Forward& f) {
    const std::size_t rows = f.rows.size();
    raw_.push_back(static_cast<char>(kTagForward));
    varint::put(raw_, rows);
    rowsel_.clear();
    for (const ForwardRow& row : f.rows) {
      varint::put(raw_, row.request);
      varint::put(raw_, static_cast<std::uint64_t>(row.position));
      varint::put(raw_, static_cast<std::uint64_t>(row.count));
      raw_.push_back(static_cast<char>(row.kind == RowKind::decode ? 1 : 0));
      rowsel_.push_back(&prev_.at(row.request));
    }
    for (int l = 0; l < layers_; ++l) {
      for (std::size_t r = 0; r < rows; ++r) {
        auto cur = f.selection(l, static_cast<int>(r));
        std::vector<std::int32_t>& prev = (*rowsel_[r])[static_cast<std::size_t>(l)];
        removed_.clear();
        added_.clear();
        std::size_t i = 0, j = 0;
        while (i < prev.size() && j < cur.size()) {
          if (prev[i] == cur[j]) {
            ++i, ++j;
          } else if (prev[i] < cur[j]) {
            removed_.push_back(static_cast<std::uint32_t>(i++));
          } else {
            added_.push_back(cur[j++]);
          }
        }
        for (; i < prev.size(); ++i)
          removed_.push_back(static_cast<std::uint32_t>(i));
        for (; j < cur.size(); ++j)
          added_.push_back(cur[j]);
        varint::put(raw_, removed_.size());
        varint::put(raw_, added_.size());
        std::int64_t last = -1;
        for (std::uint32_t x : removed_) {
          varint::put(raw_, static_cast<std::uint64_t>(x - last - 1));
          last = x;
        }
        last = -1;
        for (std::int32_t x : added_) {
          varint::put(raw_, static_cast<std::uint64_t>(x - last - 1));
          last = x;
        }
        prev.assign(cur.begin(), cur.end());
      }
    }
  }

  void flush_frame() {
    if (frame_records_ == 0) return;
    if (raw_.size() > kMaxFrameBytes) {
      throw TraceError("record " + std::to_string(total_ - 1) + " is too large for one frame (" +
                       std::to_string(raw_.size()) + " bytes coded)");
    }
    std::string head(kFrameMagic, sizeof kFrameMagic);
    const std::string* payload = &raw_;
    std::uint32_t codec = kCodecRaw;
    if (cctx_) {
      comp_.resize(ZSTD_compressBound(raw_.size()));
      const std::size_t n =
          ZSTD_compress2(cctx_, comp_.data(), comp_.size(), raw_.data(), raw_.size());
      if (ZSTD_isError(n)) throw TraceError(std::string("zstd: ") + ZSTD_getErrorName(n));
      comp_.resize(n);
      payload = &comp_;
      codec = kCodecZstd;
    }
    put_u32(head, codec);
    put_u32(head, static_cast<std::uint32_t>(raw_.size()));
    put_u32(head, static_cast<std::uint32_t>(payload->size()));
    put_u32(head, frame_records_);
    put(head);
    put(*payload);
    raw_.clear();
    frame_records_ = 0;
  }

  void put(const std::string& bytes) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), f_.get()) != bytes.size()) {
      throw TraceError("cannot write '" + path_ + "': " + std::strerror(errno));
    }
  }

  std::string path_;
  int layers_;
  TraceValidator validator_;
  int level_;
  std::size_t frame_bytes_;
  FilePtr f_;
  ZSTD_CCtx* cctx_ = nullptr;
  std::string raw_, comp_;
  std::uint32_t frame_records_ = 0;
  std::uint64_t total_ = 0;
  bool closed_ = false;
  std::unordered_map<RequestId, Selections> prev_;
  std::vector<Selections*> rowsel_;
  std::vector<std::uint32_t> removed_;
  std::vector<std::int32_t> added_;
};

}  // namespace

std::unique_ptr<TraceWriter> create_binary_writer(const std::string& path, const TraceHeader& h,
                                                  int zstd_level, std::size_t frame_bytes) {
  return std::make_unique<BinaryWriter>(path, h, zstd_level, frame_bytes);
}

}  // namespace kvtier::traces::detail
