#pragma once
// Reading a whole (small) text input: a profile, a geometry, a points file, a run's JSON.
#include <string>

namespace kvtier::io {

// The whole file as text. Throws std::runtime_error "cannot read WHAT 'PATH': REASON" (WHAT:
// what the file is, e.g. "hardware profile"; empty for none; REASON the system's, or "it is a
// directory, not a file": a directory opens as a stream of nothing, an empty file's text).
std::string read_text_file(const std::string& path, const std::string& what = "");

}  // namespace kvtier::io
