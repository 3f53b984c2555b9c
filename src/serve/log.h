// The server's log on stderr: one line per event, image-controlled text (references, uids, file
// names in errors) made safe for a terminal or a log viewer.
#pragma once

#include <string_view>

namespace imgcheck::serve {

/// Writes "imgcheck serve: MESSAGE" as one line, the message through report::LogLine.
void Log(std::string_view message);

}  // namespace imgcheck::serve
