#include "cuda/weights/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <boost/json.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "io/pending_output.hpp"

namespace kvtier::weights {

namespace json = boost::json;

namespace {

struct DtypeRow {
  Dtype d;
  const char* name;
  int size;
};
constexpr DtypeRow kDtypes[] = {
    {Dtype::boolean, "BOOL", 1}, {Dtype::u8, "U8", 1},           {Dtype::i8, "I8", 1},
    {Dtype::i16, "I16", 2},      {Dtype::u16, "U16", 2},         {Dtype::f16, "F16", 2},
    {Dtype::bf16, "BF16", 2},    {Dtype::i32, "I32", 4},         {Dtype::u32, "U32", 4},
    {Dtype::f32, "F32", 4},      {Dtype::f64, "F64", 8},         {Dtype::i64, "I64", 8},
    {Dtype::u64, "U64", 8},      {Dtype::f8_e4m3, "F8_E4M3", 1}, {Dtype::f8_e5m2, "F8_E5M2", 1},
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw WeightsError(path + ": " + what);
}

std::string tensor_ctx(const std::string& name) {
  return "tensor '" + name + "'";
}

// A JSON number that must be a non-negative integer fitting int64.
std::int64_t nonneg_int(const json::value& v, const std::string& path, const std::string& what) {
  if (v.is_int64() && v.get_int64() >= 0) return v.get_int64();
  if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
    return static_cast<std::int64_t>(v.get_uint64());
  fail(path, what + ": expected a non-negative integer, got " + json::serialize(v));
}

std::string offsets_string(const TensorInfo& t) {
  return "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
}

TensorInfo parse_entry(const std::string& name, const json::value& v, const std::string& path) {
  const std::string ctx = tensor_ctx(name);
  if (name.empty()) fail(path, "a tensor has an empty name");
  if (!v.is_object()) fail(path, ctx + ": expected an object, got " + json::serialize(v));
  const json::object& o = v.get_object();
  TensorInfo t;
  t.spec.name = name;
  bool have_dtype = false, have_shape = false, have_offsets = false;
  for (const auto& [key, val] : o) {
    if (key == "dtype") {
      if (!val.is_string()) fail(path, ctx + ": dtype must be a string");
      t.spec.dtype = dtype_from_name(std::string(val.get_string()), path + ": " + ctx);
      have_dtype = true;
    } else if (key == "shape") {
      if (!val.is_array()) fail(path, ctx + ": shape must be an array");
      for (const json::value& d : val.get_array())
        t.spec.shape.push_back(nonneg_int(d, path, ctx + ": shape"));
      have_shape = true;
    } else if (key == "data_offsets") {
      if (!val.is_array() || val.get_array().size() != 2)
        fail(path, ctx + ": data_offsets must be an array [begin, end]");
      t.begin = nonneg_int(val.get_array()[0], path, ctx + ": data_offsets");
      t.end = nonneg_int(val.get_array()[1], path, ctx + ": data_offsets");
      have_offsets = true;
    } else {
      fail(path, ctx + ": unknown field '" + std::string(key) + "'");
    }
  }
  if (!have_dtype) fail(path, ctx + ": no dtype");
  if (!have_shape) fail(path, ctx + ": no shape");
  if (!have_offsets) fail(path, ctx + ": no data_offsets");
  if (t.end < t.begin)
    fail(path, ctx + ": data_offsets " + offsets_string(t) + " end before begin");
  std::int64_t elements = 0;
  try {
    elements = shape_elements(t.spec.shape, ctx);
  } catch (const WeightsError& e) {
    fail(path, e.what());
  }
  const int size = dtype_size(t.spec.dtype);
  if (elements > std::numeric_limits<std::int64_t>::max() / size)
    fail(path, ctx + ": shape " + shape_string(t.spec.shape) + " is too large");
  if (t.end - t.begin != elements * size) {
    fail(path, ctx + ": data_offsets " + offsets_string(t) + " hold " +
                   std::to_string(t.end - t.begin) + " bytes but " + dtype_name(t.spec.dtype) +
                   " " + shape_string(t.spec.shape) + " needs " + std::to_string(elements * size));
  }
  return t;
}

}  // namespace

// ---- dtypes and shapes ----

const char* dtype_name(Dtype d) {
  for (const DtypeRow& r : kDtypes)
    if (r.d == d) return r.name;
  return "?";
}

Dtype dtype_from_name(const std::string& name, const std::string& context) {
  for (const DtypeRow& r : kDtypes)
    if (name == r.name) return r.d;
  throw WeightsError(context + ": unknown dtype '" + name + "'");
}

int dtype_size(Dtype d) {
  for (const DtypeRow& r : kDtypes)
    if (r.d == d) return r.size;
  return 1;
}

std::string shape_string(const Shape& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::int64_t shape_elements(const Shape& s, const std::string& context) {
  std::int64_t n = 1;
  for (std::int64_t d : s) {
    if (d < 0) throw WeightsError(context + ": negative dimension in shape " + shape_string(s));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      throw WeightsError(context + ": shape " + shape_string(s) + " overflows 64 bits");
    n *= d;
  }
  return n;
}

// ---- header ----

Header parse_header(std::span<const std::byte> head, std::int64_t file_bytes,
                    const std::string& path) {
  if (file_bytes < 8 || head.size() < 8) {
    fail(path, "the file is " + std::to_string(file_bytes) +
                   " bytes, too short for the 8-byte header length (truncated?)");
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<std::uint8_t>(head[static_cast<std::size_t>(i)]);
  if (n < 2 || n > static_cast<std::uint64_t>(kMaxHeaderBytes)) {
    fail(path, "header length " + std::to_string(n) + " is outside 2.." +
                   std::to_string(kMaxHeaderBytes) + " (not a safetensors file?)");
  }
  const auto hn = static_cast<std::int64_t>(n);
  if (8 + hn > file_bytes || static_cast<std::int64_t>(head.size()) < 8 + hn) {
    fail(path, "the header of " + std::to_string(hn) + " bytes runs past the end of the file (" +
                   std::to_string(file_bytes) + " bytes): the file is truncated");
  }
  const std::string_view text(reinterpret_cast<const char*>(head.data()) + 8,
                              static_cast<std::size_t>(hn));
  if (text.front() != '{') fail(path, "the header does not start with '{' (not safetensors?)");
  json::error_code ec;
  json::value root = json::parse(text, ec);
  if (ec) fail(path, "the header is not valid JSON: " + ec.message());
  if (!root.is_object()) fail(path, "the header is not a JSON object");

  Header h;
  h.data_start = 8 + hn;
  const std::int64_t data_bytes = file_bytes - h.data_start;
  std::set<std::string> seen;
  for (const auto& [key, val] : root.get_object()) {
    const std::string name(key);
    if (!seen.insert(name).second) fail(path, tensor_ctx(name) + " is listed twice");
    if (name == "__metadata__") {
      if (!val.is_object()) fail(path, "__metadata__ must be an object of strings");
      for (const auto& [mk, mv] : val.get_object()) {
        if (!mv.is_string()) fail(path, "__metadata__ '" + std::string(mk) + "' must be a string");
        h.metadata[std::string(mk)] = std::string(mv.get_string());
      }
      continue;
    }
    TensorInfo t = parse_entry(name, val, path);
    if (t.end > data_bytes) {
      fail(path, tensor_ctx(name) + ": data_offsets " + offsets_string(t) +
                     " run past the end of the data section (" + std::to_string(data_bytes) +
                     " bytes): the file is truncated or the offsets are wrong");
    }
    h.tensors.push_back(std::move(t));
  }
  std::stable_sort(h.tensors.begin(), h.tensors.end(),
                   [](const TensorInfo& a, const TensorInfo& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  std::int64_t at = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : h.tensors) {
    if (t.begin < at) {
      fail(path, tensor_ctx(t.spec.name) + " " + offsets_string(t) + " overlaps " +
                     tensor_ctx(prev->spec.name) + " " + offsets_string(*prev));
    }
    if (t.begin > at) {
      fail(path, "a gap of " + std::to_string(t.begin - at) + " bytes before " +
                     tensor_ctx(t.spec.name) + " " + offsets_string(t) +
                     " (tensors must tile the data section)");
    }
    at = t.end;
    prev = &t;
  }
  if (at != data_bytes) {
    fail(path, std::to_string(data_bytes - at) +
                   " bytes follow the last tensor's data (the data section is " +
                   std::to_string(data_bytes) + " bytes, the tensors cover " + std::to_string(at) +
                   ")");
  }
  return h;
}

// ---- reader ----

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail(path, std::string("cannot stat: ") + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  file_bytes_ = static_cast<std::int64_t>(st.st_size);
  if (file_bytes_ > 0) {
    void* p = ::mmap(nullptr, static_cast<std::size_t>(file_bytes_), PROT_READ, MAP_PRIVATE, fd, 0);
    const int e = errno;
    ::close(fd);
    if (p == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(e));
    map_ = static_cast<const std::byte*>(p);
  } else {
    ::close(fd);
  }
  try {
    header_ = parse_header(std::span<const std::byte>(map_, static_cast<std::size_t>(file_bytes_)),
                           file_bytes_, path);
  } catch (...) {
    if (map_) ::munmap(const_cast<std::byte*>(map_), static_cast<std::size_t>(file_bytes_));
    map_ = nullptr;
    throw;
  }
  for (std::size_t i = 0; i < header_.tensors.size(); ++i)
    index_[header_.tensors[i].spec.name] = i;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<std::byte*>(map_), static_cast<std::size_t>(file_bytes_));
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::data(const std::string& name) const {
  const TensorInfo* t = find(name);
  if (!t) fail(path_, tensor_ctx(name) + " is missing");
  return data(*t);
}

std::span<const std::byte> SafetensorsFile::data(const TensorInfo& t) const {
  return {map_ + header_.data_start + t.begin, static_cast<std::size_t>(t.end - t.begin)};
}

// ---- writer ----

std::string header_json(const std::vector<TensorSpec>& specs, const Metadata& metadata) {
  json::object root;
  if (!metadata.empty()) {
    json::object m;
    for (const auto& [k, v] : metadata)
      m[k] = v;
    root["__metadata__"] = std::move(m);
  }
  std::int64_t at = 0;
  for (const TensorSpec& s : specs) {
    if (s.name.empty()) throw WeightsError("write: a tensor has an empty name");
    if (s.name == "__metadata__") throw WeightsError("write: '__metadata__' is not a tensor name");
    if (root.contains(s.name)) throw WeightsError("write: " + tensor_ctx(s.name) + " twice");
    json::array shape;
    for (std::int64_t d : s.shape)
      shape.push_back(d);
    const std::int64_t bytes = s.bytes();
    root[s.name] = json::object{{"dtype", dtype_name(s.dtype)},
                                {"shape", std::move(shape)},
                                {"data_offsets", json::array{at, at + bytes}}};
    at += bytes;
  }
  return json::serialize(root);
}

void write_safetensors(const std::string& path, const std::vector<TensorSpec>& specs,
                       const Metadata& metadata, const FillFn& fill) {
  std::string header = header_json(specs, metadata);
  while ((8 + header.size()) % 8 != 0)
    header.push_back(' ');
  io::PendingOutput pending(path);
  const std::string& tmp = pending.write_path();
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(tmp, std::string("cannot create: ") + std::strerror(errno));
  // The temporary goes with `pending` on every error below.
  auto put = [&](const void* p, std::size_t n) {
    if (n && std::fwrite(p, 1, n, f) != n) {
      const int e = errno;
      std::fclose(f);
      fail(tmp, std::string("write failed: ") + std::strerror(e));
    }
  };
  unsigned char len[8];
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  put(len, 8);
  put(header.data(), header.size());
  constexpr std::int64_t kChunk = std::int64_t{16} << 20;
  std::vector<std::byte> buf;
  for (const TensorSpec& s : specs) {
    const std::int64_t bytes = s.bytes();
    for (std::int64_t off = 0; off < bytes; off += kChunk) {
      const std::int64_t len_chunk = std::min(kChunk, bytes - off);
      buf.assign(static_cast<std::size_t>(len_chunk), std::byte{0});
      try {
        fill(s, off, std::span<std::byte>(buf));
      } catch (...) {
        std::fclose(f);
        throw;
      }
      put(buf.data(), buf.size());
    }
  }
  if (std::fclose(f) != 0) fail(tmp, std::string("close failed: ") + std::strerror(errno));
  if (const std::error_code ec = pending.try_commit())
    fail(path, "cannot rename from .tmp: " + ec.message());
}

// ---- bf16 ----

std::uint16_t float_to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace kvtier::weights
