// The JSON-lines form: one header object on the first line, then one record per line:
//   {"begin":{"id":1,"prompt_tokens":32768,"shared_with":0,"shared_pages":0}}
//   {"forward":{"rows":[{"request":1,"position":32768,"count":1,"kind":"decode"}],
//               "selections":[[[0,1,5]], ...]}}          // [layer][row] -> ascending ids
//   {"end":{"id":1}}
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "traces/format_internal.hpp"
#include "traces/validate.hpp"

namespace kvtier::traces::detail {
namespace {

namespace json = boost::json;

class JsonlWriter final : public TraceWriter {
 public:
  JsonlWriter(const std::string& path, const TraceHeader& h)
      : path_(path), validator_(h.geometry), layers_(h.geometry.qsa_layers()) {
    out_.open(path, std::ios::binary | std::ios::trunc);
    if (!out_) throw TraceError("cannot create '" + path + "': " + std::strerror(errno));
    out_ << json::serialize(header_to_json(h)) << '\n';
  }

  void write(const Record& r) override {
    if (closed_) throw TraceError("write to closed trace '" + path_ + "'");
    const std::string bad = validator_.check(r);
    if (!bad.empty()) throw TraceError("record " + std::to_string(total_) + ": " + bad);
    json::object o;
    if (const auto* b = std::get_if<RequestBegin>(&r)) {
      o["begin"] = {{"id", b->id},
                    {"prompt_tokens", b->prompt_tokens},
                    {"shared_with", b->shared_with},
                    {"shared_pages", b->shared_pages}};
    } else if (const auto* e = std::get_if<RequestEnd>(&r)) {
      o["end"] = {{"id", e->id}};
    } else {
      const Forward& f = std::get<Forward>(r);
      json::array rows, sel;
      for (const ForwardRow& row : f.rows) {
        rows.push_back({{"request", row.request},
                        {"position", row.position},
                        {"count", row.count},
                        {"kind", row.kind == RowKind::decode ? "decode" : "prefill"}});
      }
      for (int l = 0; l < layers_; ++l) {
        json::array per_row;
        for (std::size_t i = 0; i < f.rows.size(); ++i) {
          json::array ids;
          for (std::int32_t id : f.selection(l, static_cast<int>(i)))
            ids.push_back(id);
          per_row.push_back(std::move(ids));
        }
        sel.push_back(std::move(per_row));
      }
      o["forward"] = {{"rows", std::move(rows)}, {"selections", std::move(sel)}};
    }
    out_ << json::serialize(o) << '\n';
    if (!out_) throw TraceError("cannot write '" + path_ + "'");
    ++total_;
  }

  void close() override {
    if (closed_) return;
    out_.flush();
    if (!out_) throw TraceError("cannot write '" + path_ + "'");
    out_.close();
    closed_ = true;
  }

 private:
  std::string path_;
  std::ofstream out_;
  TraceValidator validator_;
  int layers_;
  std::uint64_t total_ = 0;
  bool closed_ = false;
};

class JsonlReader final : public TraceReader {
 public:
  explicit JsonlReader(const std::string& path) : path_(path), validator_(Geometry{}) {
    in_.open(path, std::ios::binary);
    if (!in_) throw TraceError("cannot open '" + path + "': " + std::strerror(errno));
    if (!next_line()) throw TraceError(path + ": empty file (no header line)");
    const json::value v = parse_line("the header line");
    header_ = header_from_json(v, path_ + ": header (line 1, byte offset 0)");
    layers_ = header_.geometry.qsa_layers();
    validator_ = TraceValidator(header_.geometry);
  }

  const TraceHeader& header() const override { return header_; }
  std::uint64_t records_read() const override { return index_; }
  std::uint64_t bytes_read() const override { return next_offset_; }

  bool next(Record& out) override {
    do {
      if (!next_line()) return false;
    } while (line_.find_first_not_of(" \t\r") == std::string::npos);
    const json::value v = parse_line("a record");
    const json::object* o = v.if_object();
    if (!o || o->size() != 1) fail("a record is an object with one key: begin, end or forward");
    const auto& [key, body] = *o->begin();
    const json::object* b = body.if_object();
    if (!b) fail("the value of \"" + std::string(key) + "\" must be an object");
    if (key == "begin") {
      RequestBegin r;
      r.id = static_cast<RequestId>(get_int(*b, "id", 0, INT64_MAX));
      r.prompt_tokens = get_int(*b, "prompt_tokens", 0, INT64_MAX);
      r.shared_with = static_cast<RequestId>(get_int(*b, "shared_with", 0, INT64_MAX, 0));
      r.shared_pages = get_int(*b, "shared_pages", 0, INT64_MAX, 0);
      stash(out);
      out = r;
    } else if (key == "end") {
      RequestEnd r;
      r.id = static_cast<RequestId>(get_int(*b, "id", 0, INT64_MAX));
      stash(out);
      out = r;
    } else if (key == "forward") {
      if (!std::holds_alternative<Forward>(out)) out = std::move(spare_);
      parse_forward(*b, std::get<Forward>(out));
    } else {
      fail("unknown record \"" + std::string(key) + "\"");
    }
    const std::string bad = validator_.check(out);
    if (!bad.empty()) fail(bad);
    ++index_;
    return true;
  }

 private:
  void stash(Record& out) {
    if (auto* f = std::get_if<Forward>(&out)) spare_ = std::move(*f);
  }

  bool next_line() {
    offset_ = next_offset_;
    if (!std::getline(in_, line_)) return false;
    ++line_no_;
    next_offset_ += line_.size() + 1;
    return true;
  }

  json::value parse_line(const char* what) {
    boost::system::error_code ec;
    json::value v = json::parse(line_, ec);
    if (ec) fail(std::string(what) + " is not valid JSON: " + ec.message());
    return v;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw TraceError(path_ + ": record " + std::to_string(index_) + " (line " +
                     std::to_string(line_no_) + ", byte offset " + std::to_string(offset_) +
                     "): " + what);
  }

  std::int64_t to_int(const json::value& v, const std::string& what, std::int64_t lo,
                      std::int64_t hi) const {
    std::int64_t x = 0;
    if (v.is_int64()) {
      x = v.get_int64();
    } else if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
      x = static_cast<std::int64_t>(v.get_uint64());
    } else {
      fail(what + " must be an integer");
    }
    if (x < lo || x > hi) fail(what + " = " + std::to_string(x) + " is out of range");
    return x;
  }

  std::int64_t get_int(const json::object& o, const char* key, std::int64_t lo, std::int64_t hi,
                       std::optional<std::int64_t> fallback = std::nullopt) const {
    const json::value* v = o.if_contains(key);
    if (!v) {
      if (fallback) return *fallback;
      fail(std::string("missing \"") + key + "\"");
    }
    return to_int(*v, key, lo, hi);
  }

  void parse_forward(const json::object& b, Forward& f) {
    const json::value* rows_v = b.if_contains("rows");
    const json::value* sel_v = b.if_contains("selections");
    if (!rows_v || !rows_v->is_array() || !sel_v || !sel_v->is_array()) {
      fail("a forward has arrays \"rows\" and \"selections\"");
    }
    const json::array& rows = rows_v->get_array();
    f.rows.resize(rows.size());
    f.layers = layers_;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const json::object* ro = rows[r].if_object();
      if (!ro) fail("row " + std::to_string(r) + " is not an object");
      ForwardRow& row = f.rows[r];
      row.request = static_cast<RequestId>(get_int(*ro, "request", 0, INT64_MAX));
      row.position = get_int(*ro, "position", 0, INT64_MAX);
      row.count = static_cast<std::int32_t>(get_int(*ro, "count", 1, INT32_MAX, 1));
      const json::value* k = ro->if_contains("kind");
      const json::string* ks = k ? k->if_string() : nullptr;
      if (!ks || (*ks != "decode" && *ks != "prefill")) {
        fail("row " + std::to_string(r) + ": \"kind\" must be \"decode\" or \"prefill\"");
      }
      row.kind = *ks == "decode" ? RowKind::decode : RowKind::prefill;
    }
    const json::array& sel = sel_v->get_array();
    if (sel.size() != static_cast<std::size_t>(layers_)) {
      fail("forward has selections for " + std::to_string(sel.size()) +
           " layers but the geometry has " + std::to_string(layers_) + " QSA layers");
    }
    f.offsets.assign(1, 0);
    f.ids.clear();
    for (int l = 0; l < layers_; ++l) {
      const json::array* per_row = sel[static_cast<std::size_t>(l)].if_array();
      if (!per_row || per_row->size() != rows.size()) {
        fail("selections[" + std::to_string(l) + "] must hold one array per row");
      }
      for (const json::value& ids : *per_row) {
        const json::array* a = ids.if_array();
        if (!a) fail("a selection must be an array of block ids");
        for (const json::value& id : *a) {
          f.ids.push_back(static_cast<std::int32_t>(to_int(id, "block id", 0, INT32_MAX)));
        }
        f.offsets.push_back(static_cast<std::int64_t>(f.ids.size()));
      }
    }
  }

  std::string path_;
  std::ifstream in_;
  std::string line_;
  std::uint64_t line_no_ = 0;
  std::uint64_t offset_ = 0, next_offset_ = 0;
  TraceHeader header_;
  int layers_ = 0;
  TraceValidator validator_;
  std::uint64_t index_ = 0;
  Forward spare_;
};

}  // namespace

std::unique_ptr<TraceReader> open_jsonl_reader(const std::string& path) {
  return std::make_unique<JsonlReader>(path);
}

std::unique_ptr<TraceWriter> create_jsonl_writer(const std::string& path, const TraceHeader& h) {
  return std::make_unique<JsonlWriter>(path, h);
}

}  // namespace kvtier::traces::detail
