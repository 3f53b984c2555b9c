// The server's log on stderr: one line per event, image-controlled text (references, uids, file
// names in errors) made safe for a terminal or a log viewer.
#pragma once

#include <cstddef>
#include <string_view>

namespace imgcheck::serve {

/// A log line's message is cut to this many bytes (and says how many it left out).
inline constexpr size_t kMaxLogMessage = 4096;

/// Writes "imgcheck serve: MESSAGE" as one line, the message through report::LogLine.
void Log(std::string_view message);

}  // namespace imgcheck::serve
