#include "frontend/decision_log.hpp"

#include <cstdio>

namespace kvtier::frontend {

void log_installs(std::ostream* out, std::int64_t forward, int state, std::int64_t step,
                  InstallKind kind, std::span<const CopyOp> copies) {
  if (out == nullptr) return;
  const char* name = kind == InstallKind::demand ? "demand" : "prefetch";
  char buf[192];
  for (const CopyOp& op : copies) {
    const int len = std::snprintf(
        buf, sizeof buf,
        "{\"forward\":%lld,\"state\":%d,\"step\":%lld,\"kind\":\"%s\",\"page\":%d,\"slot\":%d,"
        "\"evicted\":%d}\n",
        static_cast<long long>(forward), state, static_cast<long long>(step), name, op.page,
        op.slot, op.evicted);
    out->write(buf, len);
  }
}

}  // namespace kvtier::frontend
