#include "serve/log.h"

#include <iostream>
#include <string>

#include "report/escape.h"

namespace imgcheck::serve {

void Log(std::string_view message) {
  // One write per line, so that lines of concurrent requests do not interleave.
  std::string cut;
  if (message.size() > kMaxLogMessage)
    cut = " ... (" + std::to_string(message.size() - kMaxLogMessage) + " more bytes)";
  std::cerr << ("imgcheck serve: " + report::LogLine(message.substr(0, kMaxLogMessage)) + cut +
                "\n")
            << std::flush;
}

}  // namespace imgcheck::serve
