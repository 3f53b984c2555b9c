// Names that are bytes, not text: what each renderer's escape does with them.
#include "report/escape.h"

#include <catch2/catch.hpp>

using namespace imgcheck::report;

TEST_CASE("Visible escapes invalid UTF-8 and control characters, keeps the rest") {
  CHECK(Visible("caf\xC3\xA9.so") == "caf\xC3\xA9.so");  // valid é stays
  CHECK(Visible("caf\xE9.so") == "caf\\xE9.so");
  CHECK(Visible("a\x1B[31mb") == "a\\x1B[31mb");
  CHECK(Visible("line\nnext\ttab\x7F") == "line\\x0Anext\ttab\\x7F");
  CHECK(Visible("\xC2\x9B") == "\\xC2\\x9B");           // C1 CSI: a terminal obeys it too
  CHECK(Visible("\xE2\x82") == "\\xE2\\x82");           // truncated sequence
  CHECK(Visible("\xC0\xAF") == "\\xC0\\xAF");           // overlong '/'
  CHECK(Visible("\xED\xA0\x80") == "\\xED\\xA0\\x80");  // a surrogate
  CHECK(Visible("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");
}

TEST_CASE("JsonText leaves valid UTF-8 alone and escapes the rest losslessly") {
  CHECK(JsonText("a\\b\x1B") == "a\\b\x1B");  // valid: JSON escapes ESC itself
  CHECK(JsonText("a\\b\xE9") == "a\\\\b\\xE9");
}

TEST_CASE("DumpJson writes strict UTF-8 JSON whatever the strings hold") {
  nlohmann::ordered_json j{{"path", "/usr/lib/caf\xE9"}, {"caf\xE9", {"x\xFF"}}, {"ok", "é"}};
  std::string text = DumpJson(j, -1);
  nlohmann::json back = nlohmann::json::parse(text);  // throws on invalid UTF-8
  CHECK(back["path"] == "/usr/lib/caf\\xE9");
  CHECK(back["caf\\xE9"][0] == "x\\xFF");
  CHECK(back["ok"] == "é");
  CHECK(DumpJson(nlohmann::json{{"k", "\xE9"}}, -1) == R"({"k":"\\xE9"})");
}

TEST_CASE("Visible is recoverable and idempotent") {
  CHECK(Visible("a\\b") == "a\\b");                 // nothing to escape: as is
  CHECK(Visible("a\\b\x1B") == "a\\\\b\\x1B");      // something escaped: backslashes doubled
  CHECK(Visible("a\\x1B\xE9") == "a\\\\x1B\\xE9");  // so a literal "\x1B" stays apart from ESC
  for (std::string s : {"plain", "a\\b\x1B", "caf\xE9\\", "\xC2\x9B\x7F"})
    CHECK(Visible(Visible(s)) == Visible(s));
}

TEST_CASE("VisibleLines keeps the text's newlines, LogLine makes one line") {
  CHECK(VisibleLines("a\x1B\nb\n") == "a\\x1B\nb\n");
  CHECK(VisibleLines("x\r\n") == "x\\x0D\n");
  CHECK(LogLine("corrupt tar: bad header\n") == "corrupt tar: bad header");
  CHECK(LogLine("first\nsecond \x1B[2J\r\n") == "first\\x0Asecond \\x1B[2J");
  CHECK(LogLine("\n") == "");
}

TEST_CASE("DumpJson writes DEL and C1 controls as u-escapes, which read back the same") {
  nlohmann::json j{{"k",
                    "a\x7F\xC2\x9B"
                    "b\xC3\xA9"}};
  std::string text = DumpJson(j, -1);
  CHECK(text == "{\"k\":\"a\\u007f\\u009bb\xC3\xA9\"}");
  CHECK(nlohmann::json::parse(text) == j);
}
