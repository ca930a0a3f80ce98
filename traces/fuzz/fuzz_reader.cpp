// libFuzzer target: any byte string handed to TraceReader must end in a clean end of
// stream or a TraceError; anything else (a crash, a sanitizer report, another exception, a
// hang, an allocation past -rss_limit_mb) is a bug.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "traces/trace_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/kvtier_fuzz_" + std::to_string(getpid()) + ".ktr";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    auto reader = kvtier::traces::TraceReader::open(path);
    kvtier::traces::Record r;
    while (reader->next(r)) {
    }
  } catch (const kvtier::traces::TraceError&) {
  }
  return 0;
}
