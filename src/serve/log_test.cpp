// The server's log: one escaped line per event, whatever the request or the image held.
#include "serve/log.h"

#include <catch2/catch.hpp>
#include <iostream>
#include <sstream>

using imgcheck::serve::Log;

TEST_CASE("a log line holds no control character and stays one line") {
  std::ostringstream captured;
  std::streambuf* saved = std::cerr.rdbuf(captured.rdbuf());
  Log("scan of registry.example/a\x1b]0;pwned\x07:1 failed: corrupt tar\nsecond line\n");
  Log("listening on https://127.0.0.1:8443");
  std::cerr.rdbuf(saved);
  CHECK(captured.str() ==
        "imgcheck serve: scan of registry.example/a\\x1B]0;pwned\\x07:1 failed: corrupt "
        "tar\\x0Asecond line\n"
        "imgcheck serve: listening on https://127.0.0.1:8443\n");
}

TEST_CASE("a log line is cut at kMaxLogMessage bytes and says how much it left out") {
  std::ostringstream captured;
  std::streambuf* saved = std::cerr.rdbuf(captured.rdbuf());
  Log(std::string(imgcheck::serve::kMaxLogMessage + 100, 'x'));
  std::cerr.rdbuf(saved);
  CHECK(captured.str() == "imgcheck serve: " + std::string(imgcheck::serve::kMaxLogMessage, 'x') +
                              " ... (100 more bytes)\n");
}
