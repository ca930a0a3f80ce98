#pragma once
// Our own reader and writer of the safetensors format (plain C++, no CUDA):
//
//   [8 bytes]  N, little-endian uint64: length of the JSON header
//   [N bytes]  JSON object, UTF-8: "name": {"dtype": "BF16", "shape": [..],
//              "data_offsets": [begin, end]} per tensor, plus an optional "__metadata__"
//              object of string -> string; may be padded with trailing spaces
//   [rest]     the data section: raw little-endian tensor bytes; offsets are relative to its
//              start, the tensors tile it exactly (no gap, no overlap, nothing after the last)
//
// The reader maps the file read-only and hands out spans into the mapping, so a tensor is
// streamed from the page cache when it is first touched; nothing is loaded up front. Every
// defect of a file (truncation, a bad header, offsets out of range or overlapping, a size that
// does not match dtype x shape) is a WeightsError naming the file and the tensor.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvtier::weights {

// A weights file that cannot be used. The message names the file and, where there is one, the
// tensor at fault.
class WeightsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Dtype {
  boolean,
  u8,
  i8,
  i16,
  u16,
  f16,
  bf16,
  i32,
  u32,
  f32,
  f64,
  i64,
  u64,
  f8_e4m3,
  f8_e5m2
};

// "BF16", "F32", ... as the format spells them.
const char* dtype_name(Dtype d);
// Throws WeightsError (with `context` in front) for a name the format does not define.
Dtype dtype_from_name(const std::string& name, const std::string& context);
int dtype_size(Dtype d);

using Shape = std::vector<std::int64_t>;
std::string shape_string(const Shape& s);  // "[24, 2560]"
// Elements of a shape; throws WeightsError on a negative dimension or int64 overflow.
std::int64_t shape_elements(const Shape& s, const std::string& context);

struct TensorSpec {
  std::string name;
  Dtype dtype = Dtype::bf16;
  Shape shape;
  std::int64_t elements() const { return shape_elements(shape, name); }
  std::int64_t bytes() const { return elements() * dtype_size(dtype); }
};

struct TensorInfo {
  TensorSpec spec;
  std::int64_t begin = 0;  // [begin, end) in the data section
  std::int64_t end = 0;
};

using Metadata = std::map<std::string, std::string>;

// Largest header the reader accepts (the reference implementation's limit).
constexpr std::int64_t kMaxHeaderBytes = 100'000'000;

// A parsed and checked header: the tensors in data order, the metadata, and where the data
// section begins. `file_bytes` is the whole file's size; `path` is used in messages only.
struct Header {
  std::vector<TensorInfo> tensors;  // sorted by begin offset
  Metadata metadata;
  std::int64_t data_start = 0;  // 8 + N
};
// Parses the first bytes of a file (at least the 8 + N header bytes, or fewer to get the
// truncation error) of total size `file_bytes`.
Header parse_header(std::span<const std::byte> head, std::int64_t file_bytes,
                    const std::string& path);

// A safetensors file mapped read-only.
class SafetensorsFile {
 public:
  // Opens, maps and checks the file; throws WeightsError.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  std::int64_t file_bytes() const { return file_bytes_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const Metadata& metadata() const { return header_.metadata; }
  // nullptr when absent.
  const TensorInfo* find(const std::string& name) const;
  // The tensor's bytes in the mapping; throws WeightsError naming a missing tensor.
  std::span<const std::byte> data(const std::string& name) const;
  std::span<const std::byte> data(const TensorInfo& t) const;

 private:
  std::string path_;
  std::int64_t file_bytes_ = 0;
  const std::byte* map_ = nullptr;
  Header header_;
  std::map<std::string, std::size_t> index_;
};

// Fills `out` with the bytes [offset, offset + out.size()) of tensor `spec`'s data; called in
// ascending offset order, once per chunk, so a writer never holds a whole tensor.
using FillFn =
    std::function<void(const TensorSpec& spec, std::int64_t offset, std::span<std::byte> out)>;

// Writes `specs` in the given order (the header lists them in that order too, after
// __metadata__); the data section starts at a multiple of 8 (the header is padded with spaces).
// Writes to `path`.tmp and renames (io::PendingOutput), so a failed write or a signal never
// leaves a half file under `path`, nor the temporary.
// Same inputs -> byte-identical file. Throws WeightsError on a duplicate or empty name or an
// I/O error.
void write_safetensors(const std::string& path, const std::vector<TensorSpec>& specs,
                       const Metadata& metadata, const FillFn& fill);

// The JSON header text `write_safetensors` would write (before padding), for tests.
std::string header_json(const std::vector<TensorSpec>& specs, const Metadata& metadata);

// bf16 <-> float (round to nearest even; NaN stays NaN).
std::uint16_t float_to_bf16(float x);
float bf16_to_float(std::uint16_t bits);

}  // namespace kvtier::weights
