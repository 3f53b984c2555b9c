#include "serve/log.h"

#include <iostream>
#include <string>

#include "report/escape.h"

namespace imgcheck::serve {

void Log(std::string_view message) {
  // One write per line, so that lines of concurrent requests do not interleave.
  std::cerr << ("imgcheck serve: " + report::LogLine(message) + "\n") << std::flush;
}

}  // namespace imgcheck::serve
