// libFuzzer target: any byte string parsed as a safetensors file must either give a header
// whose tensors tile a data section inside the file, each as many bytes as its dtype x shape,
// or a WeightsError; anything else (a crash, a sanitizer report, another exception, a hang,
// an allocation past -rss_limit_mb) is a bug. The header is parsed from libFuzzer's own buffer,
// so ASan sees any read past the file's end (a mapping would hide it).
#include <cstddef>
#include <cstdint>
#include <span>

#include "cuda/weights/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvtier::weights;
  const auto file = std::as_bytes(std::span(data, size));
  const auto file_bytes = static_cast<std::int64_t>(size);
  try {
    const Header h = parse_header(file, file_bytes, "fuzz.safetensors");
    std::int64_t next = 0;  // the tensors, in data order, tile the section
    for (const TensorInfo& t : h.tensors) {
      if (t.begin != next || t.end < t.begin || t.end - t.begin != t.spec.bytes()) __builtin_trap();
      next = t.end;
    }
    if (h.data_start < 8 || h.data_start + next != file_bytes) __builtin_trap();
  } catch (const WeightsError&) {
  }
  return 0;
}
