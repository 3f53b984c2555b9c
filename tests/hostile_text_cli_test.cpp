// Hostile text: names, config strings and references holding terminal escape sequences and
// bytes that are not UTF-8. Every human-facing output (text report, catalog, layers, why,
// stderr) must hold no raw control character and no invalid UTF-8, every error must be one line,
// and JSON, SARIF, code quality and JUnit must stay well-formed and keep the names recoverable
// (rules/README.md, "Names that are not UTF-8").
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "elf_builder.h"
#include "image_writer.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;

namespace {

const std::string kTitle = "\x1b]0;pwned\x07";  // OSC: sets the terminal's title
const std::string kClear = "\x1b[2J";           // CSI: clears the screen
const std::string kLatin1 = "\xe9";             // 'é' from a Latin-1 tool: not UTF-8
const std::string kCsi8 = "\xc2\x9b";           // U+009B, the one-byte CSI, in valid UTF-8

// A directory whose name drives a terminal, is not UTF-8 and holds a backslash, so that the
// escaping can be seen to be recoverable.
const std::string kDir = "opt/" + kTitle + "a\\b" + kLatin1 + kClear;
// The same, as the text outputs must show it: each byte of the escape sequences and the Latin-1
// byte as \xHH, the backslash doubled.
const std::string kDirShown = "opt/\\x1B]0;pwned\\x07a\\\\b\\xE9\\x1B[2J";
const std::string kLdPath = "/opt/" + kClear + kCsi8 + "31m\x7f" + "/lib";
const std::string kTag = "v1" + kTitle;

// True when `s` is strict UTF-8 (no overlong forms, no surrogates, at most U+10FFFF) with no
// control character but newline and tab: what a terminal can be shown safely.
bool Safe(const std::string& s, std::string& why) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  for (size_t i = 0; i < s.size();) {
    unsigned c = byte(i);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    bool ok = n != 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) {
      ok = (byte(i + k) & 0xC0) == 0x80;
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[n] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      why = "invalid UTF-8 at byte " + std::to_string(i);
      return false;
    }
    if ((cp < 0x20 && cp != '\n' && cp != '\t') || (cp >= 0x7F && cp < 0xA0)) {
      why = "control character " + std::to_string(cp) + " at byte " + std::to_string(i);
      return false;
    }
    i += n;
  }
  return true;
}

#define CHECK_SAFE(text)           \
  do {                             \
    std::string why_;              \
    bool safe_ = Safe(text, why_); \
    INFO(#text << ": " << why_);   \
    CHECK(safe_);                  \
  } while (false)

// The bytes of a name from its JSON string: "\xHH" is the byte HH and "\\" a backslash.
std::string Decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '\\') {
      out += '\\';
      ++i;
    } else if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x') {
      out += static_cast<char>(std::stoi(s.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Every string in `j` (keys too), decoded.
void Strings(const nlohmann::json& j, std::vector<std::string>& out) {
  if (j.is_string()) out.push_back(Decode(j.get<std::string>()));
  if (j.is_object())
    for (const auto& [key, value] : j.items()) {
      out.push_back(Decode(key));
      Strings(value, out);
    }
  if (j.is_array())
    for (const auto& e : j) Strings(e, out);
}

// True when some string of `j`, decoded, contains `bytes`.
bool Holds(const nlohmann::json& j, const std::string& bytes) {
  std::vector<std::string> all;
  Strings(j, all);
  for (const auto& s : all)
    if (s.find(bytes) != std::string::npos) return true;
  return false;
}

struct Out {
  int status = -1;
  std::string out, err;
};

// imgcheck `args` under HostileCommand, stdout and stderr apart.
Out Imgcheck(const std::string& args) {
  TempDir dir;
  // Run() adds 2>&1 after the command: the inner group's redirection keeps stderr apart.
  CommandResult r = Run("{ { " + HostileCommand(args) + "; } 2>" + Quote(dir / "stderr") + "; }");
  return {r.status, r.output, ReadFile(dir / "stderr")};
}

// A failed run: exit 2 and exactly one clean line on stderr, naming `what`.
void CheckOneLineError(const Out& r, const std::string& what) {
  INFO(r.out << r.err);
  CHECK(r.status == 2);
  REQUIRE(!r.err.empty());
  CHECK(r.err.rfind("imgcheck: ", 0) == 0);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK(r.err.find(what) != std::string::npos);
  CHECK_SAFE(r.err);
}

struct Fixture {
  TempDir dir;
  std::string ref;
  Fixture() {
    using imgcheck::elf::fixture::BuildElf;
    imgcheck::elf::fixture::ElfSpec cudart;
    cudart.soname = "libcudart.so.12";
    ImageRecipe r;
    r.env = {"PATH=/usr/bin:/bin", "LD_LIBRARY_PATH=" + kLdPath, "GREETING=" + kTitle + kClear};
    r.labels = {{"org.example" + kTitle, kClear + "label"}};
    // IC051 (an unmanaged CUDA library in kDir), IC014 (a dangling soname link whose target
    // holds ESC), a corrupt ELF (a diagnostic), IC060 (kLdPath does not exist).
    r.layers.push_back(MakeLayer({File(kDir + "/libcudart.so.12", BuildElf(cudart)),
                                  Symlink(kDir + "/libcufft.so.11", "libcufft.so." + kClear),
                                  File(kDir + "/libcublas.so.12", std::string("\x7f"
                                                                              "ELF\x02\x01"))},
                                 Compression::kGzip, "COPY " + kTitle + " /opt # " + kClear));
    WriteOciLayout(dir / "layout", r, kTag);
    ref = Quote("oci:" + (dir / "layout").string() + ":" + kTag);
  }
};

const Fixture& Image() {
  static Fixture f;
  return f;
}

}  // namespace

TEST_CASE("the text report shows hostile names escaped and drives no terminal", "[hostile]") {
  Out r = Imgcheck("scan -q " + Image().ref);
  INFO(r.out << r.err);
  REQUIRE((r.status == 0 || r.status == 1));
  CHECK_SAFE(r.out);
  CHECK_SAFE(r.err);
  CHECK(r.out.find(kDirShown + "/libcufft.so.11") != std::string::npos);  // IC014's path
  CHECK(r.out.find("COPY \\x1B]0;pwned\\x07 /opt # \\x1B[2J") != std::string::npos);
  CHECK(r.out.find("/opt/\\x1B[2J\\xC2\\x9B31m\\x7F/lib") != std::string::npos);  // IC060
  CHECK(r.out.find("v1\\x1B]0;pwned\\x07") != std::string::npos);                 // reference
}

TEST_CASE("JSON, SARIF and code quality parse and keep the names' bytes", "[hostile]") {
  TempDir out;
  Out r = Imgcheck("scan -q " + Image().ref + " -o json=" + Quote(out / "r.json") + " -o sarif=" +
                   Quote(out / "r.sarif") + " -o codequality=" + Quote(out / "cq.json"));
  INFO(r.out << r.err);
  REQUIRE((r.status == 0 || r.status == 1));
  CHECK_SAFE(r.err);
  for (const char* file : {"r.json", "r.sarif", "cq.json"}) {
    INFO(file);
    std::string text = ReadFile(out / file);
    CHECK_SAFE(text);  // JSON escapes C0; DEL and C1 go out as \u escapes too
    nlohmann::json j = nlohmann::json::parse(text);  // throws on invalid UTF-8
    CHECK(Holds(j, "/" + kDir + "/libcufft.so.11"));
  }
  nlohmann::json j = nlohmann::json::parse(ReadFile(out / "r.json"));
  CHECK(Holds(j, kLdPath));
  CHECK(Holds(j, "COPY " + kTitle + " /opt # " + kClear));
  CHECK(j["image"]["reference"].get<std::string>().find(kTag) != std::string::npos);
  CHECK(Holds(nlohmann::json::parse(ReadFile(out / "r.sarif")), kLdPath));
}

TEST_CASE("JUnit is well-formed XML whatever the names hold", "[hostile]") {
  if (!HaveProgram("python3")) return Skip("python3 (the XML parser) not installed");
  TempDir out;
  Out r = Imgcheck("scan -q " + Image().ref + " -o junit=" + Quote(out / "r.xml"));
  INFO(r.out << r.err);
  REQUIRE((r.status == 0 || r.status == 1));
  std::string xml = ReadFile(out / "r.xml");
  CHECK_SAFE(xml);
  CHECK(xml.find(kDirShown + "/libcufft.so.11") != std::string::npos);
  CommandResult parsed =
      Run("python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1]); "
          "print(\"parsed\")' " +
          Quote(out / "r.xml"));
  INFO(parsed.output);
  CHECK(parsed.status == 0);
  CHECK(parsed.output == "parsed\n");
}

TEST_CASE("catalog, layers and why show hostile names escaped", "[hostile]") {
  Out table = Imgcheck("catalog -q " + Image().ref);
  INFO(table.out << table.err);
  CHECK(table.status == 0);
  CHECK_SAFE(table.out);
  CHECK_SAFE(table.err);
  CHECK(table.out.find(kDirShown + "/libcudart.so.12") != std::string::npos);
  CHECK(table.out.find("LD_LIBRARY_PATH=/opt/\\x1B[2J") != std::string::npos);

  Out json = Imgcheck("catalog -q --format json " + Image().ref);
  CHECK(json.status == 0);
  CHECK(Holds(nlohmann::json::parse(json.out), "/" + kDir + "/libcudart.so.12"));

  Out layers = Imgcheck("layers -q " + Image().ref);
  INFO(layers.out << layers.err);
  CHECK(layers.status == 0);
  CHECK_SAFE(layers.out);
  CHECK_SAFE(layers.err);
  CHECK(layers.out.find("COPY \\x1B]0;pwned\\x07 /opt # \\x1B[2J") != std::string::npos);
  CHECK(Holds(nlohmann::json::parse(Imgcheck("layers -q --format json " + Image().ref).out),
              "COPY " + kTitle + " /opt # " + kClear));

  Out why = Imgcheck("why -q " + Image().ref + " " + Quote("/" + kDir + "/libcudart.so.12"));
  INFO(why.out << why.err);
  CHECK_SAFE(why.out);
  CHECK_SAFE(why.err);
  CHECK(why.out.find(kDirShown) != std::string::npos);
  Out target = Imgcheck("why -q " + Image().ref + " " + Quote("lib" + kTitle + ".so"));
  CHECK_SAFE(target.out);
  CHECK_SAFE(target.err);
}

TEST_CASE("rules list and explain show rule files given with --rules escaped", "[hostile]") {
  TempDir dir;
  // JSON holds the controls as \u escapes; the parsed strings hold the raw characters.
  WriteFile(dir / "rules.json", R"({"rules": {"rows": [
    {"id": "IC001", "name": "cudnn-version-mismatch\u001b]0;pwned\u0007", "severity": "error",
     "summary": "summary \u001b[2J", "breaks": "breaks \u009b31m", "errors": ["seen \u001b[2J"],
     "remediation": "fix \u007f", "source": "test \u001b]0;pwned\u0007"}]}})");
  std::string rules = " --rules " + Quote(dir.path());
  for (std::string args : {"rules list", "rules explain IC001"}) {
    Out r = Imgcheck(args + rules);
    INFO(args << ": " << r.out << r.err);
    CHECK(r.status == 0);
    CHECK_SAFE(r.out);
    CHECK(r.out.find("cudnn-version-mismatch\\x1B]0;pwned\\x07") != std::string::npos);
  }
  Out json = Imgcheck("rules list --json" + rules);
  CHECK_SAFE(json.out);
  CHECK(nlohmann::json::parse(json.out)[0]["name"] == "cudnn-version-mismatch" + kTitle);
}

TEST_CASE("every error is one escaped line on stderr", "[hostile]") {
  CheckOneLineError(Imgcheck("scan " + Quote("oci:/nonexistent/" + kTitle + kLatin1 + ":x")),
                    "/nonexistent/\\x1B]0;pwned\\x07\\xE9");
  CheckOneLineError(Imgcheck("layers " + Quote("oci:/nonexistent/" + kClear)), "\\x1B[2J");
  CheckOneLineError(Imgcheck("scan " + Image().ref + " --dockerfile " +
                             Quote("/nonexistent\nerror: forged " + kClear)),
                    "/nonexistent\\x0Aerror: forged \\x1B[2J");
  CheckOneLineError(Imgcheck("rules explain " + Quote(kTitle)),
                    "unknown rule '\\x1B]0;pwned\\x07'");
  CheckOneLineError(Imgcheck(Quote("sc" + kClear)), "unknown command 'sc\\x1B[2J'");
  CheckOneLineError(Imgcheck("scan " + Image().ref + " " + Quote(kTitle)),
                    "unexpected argument(s): \\x1B]0;pwned\\x07");
  // CLI11's own refusals: one line, not the range of a double.
  Out zero = Imgcheck("scan --max-files 0 x");
  CheckOneLineError(zero, "--max-files: must be a number above 0, not '0'");
  CHECK(zero.err.find("e+308") == std::string::npos);
  CheckOneLineError(Imgcheck("scan --jobs -3 x"), "--jobs");
  CheckOneLineError(Imgcheck("scan --no-such-flag x"), "--no-such-flag");
  CheckOneLineError(Imgcheck("scan"), "image is required");
  CheckOneLineError(Imgcheck("catalog --format " + Quote("x" + kClear) + " x"),
                    "--format: unknown format 'x\\x1B[2J'");
}
