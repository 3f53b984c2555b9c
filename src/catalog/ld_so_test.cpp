#include "catalog/ld_so.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "fake_image.h"
#include "support.h"

namespace imgcheck::catalog {
namespace {

namespace fs = std::filesystem;
using testing::OldCache;
using testing::Run;

struct Listed {
  std::string name, path, hwcap;
  bool operator==(const Listed&) const = default;
};

// `ldconfig -p -C FILE`: "\tNAME (libc6,x86-64[, hwcap: "x86-64-v3"]) => PATH" per entry.
std::vector<Listed> LdconfigPrint(const fs::path& cache) {
  auto r = Run("ldconfig -p -C '" + cache.string() + "'");
  REQUIRE(r.status == 0);
  std::vector<Listed> out;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '\t') continue;
    size_t paren = line.find(" (");
    size_t arrow = line.rfind(") => ");
    REQUIRE(paren != std::string::npos);
    REQUIRE(arrow != std::string::npos);
    Listed l{line.substr(1, paren - 1), line.substr(arrow + 5), ""};
    std::string flags = line.substr(paren + 2, arrow - paren - 2);
    if (size_t h = flags.find("hwcap: \""); h != std::string::npos)
      l.hwcap = flags.substr(h + 8, flags.find('"', h + 8) - h - 8);
    out.push_back(l);
  }
  return out;
}

std::vector<Listed> Parsed(const LdCacheFile& cache) {
  std::vector<Listed> out;
  for (const auto& e : cache.entries) out.push_back({e.name, e.path, e.hwcaps_subdir});
  return out;
}

LdCacheFile ParseFile(const fs::path& path) {
  auto parsed = ParseLdCache(testing::ReadFile(path));
  INFO(path.string() << (parsed ? "" : ": " + parsed.error().message));
  REQUIRE(parsed.has_value());
  return std::move(parsed).value();
}

TEST_CASE("ld.so.cache of this machine parses as ldconfig -p prints it", "[ld_so]") {
  if (!testing::HaveProgram("ldconfig") || !fs::exists("/etc/ld.so.cache"))
    return testing::Skip("no ldconfig or /etc/ld.so.cache here");
  LdCacheFile cache = ParseFile("/etc/ld.so.cache");
  auto expected = LdconfigPrint("/etc/ld.so.cache");
  CHECK(!expected.empty());
  CHECK(Parsed(cache) == expected);
}

TEST_CASE("ld.so.cache written by ldconfig in every format matches ldconfig -p", "[ld_so]") {
  if (!testing::HaveProgram("ldconfig") || geteuid() != 0)
    return testing::Skip("ldconfig -r needs root (it chroots)");
  testing::TempDir dir;
  fs::path root = dir / "root";
  // Two libraries in a conf directory, one with a glibc-hwcaps variant, one in /usr/lib.
  testing::SharedObject a, b;
  a.soname = "libimga.so.1";
  b.soname = "libimgb.so.2";
  testing::Compile(a, root / "opt/one/libimga.so.1.0");
  testing::Compile(a, root / "opt/one/glibc-hwcaps/x86-64-v3/libimga.so.1.0");
  testing::Compile(b, root / "usr/lib/libimgb.so.2.5");
  testing::WriteFile(root / "etc/ld.so.conf", "# test\ninclude ld.so.conf.d/*.conf\n");
  testing::WriteFile(root / "etc/ld.so.conf.d/one.conf", "/opt/one\n");
  for (std::string format : {"new", "compat", "old"}) {
    SECTION(format) {
      std::string name = "/etc/cache." + format;
      auto r = Run("ldconfig -c " + format + " -r '" + root.string() + "' -C " + name);
      INFO(r.output);
      REQUIRE(r.status == 0);
      LdCacheFile cache = ParseFile(root.string() + name);
      auto expected = LdconfigPrint(root.string() + name);
      auto parsed = Parsed(cache);
      if (format == "compat") {
        // ldconfig -p (2.36) reads the glibc-hwcaps names of a combined cache from the file's
        // start instead of the new header's, and prints garbage; the entries themselves agree.
        for (auto* list : {&parsed, &expected})
          for (Listed& l : *list) l.hwcap = l.hwcap.empty() ? "" : "(some)";
      }
      CHECK(parsed == expected);
      CHECK(expected.size() >= 2);
      auto want = format == "new"   ? LdCacheFile::Format::kNew
                  : format == "old" ? LdCacheFile::Format::kOld
                                    : LdCacheFile::Format::kCombined;
      CHECK(cache.format == want);
      if (format != "old") CHECK(cache.generator.find("ldconfig") != std::string::npos);
      int32_t flags = CacheFlagsFor(62, true);
      const LdCacheRecord* hit = cache.Lookup("libimga.so.1", flags, {});
      REQUIRE(hit != nullptr);
      if (format != "old") {
        CHECK(hit->path == "/opt/one/libimga.so.1");
        const LdCacheRecord* v3 = cache.Lookup("libimga.so.1", flags, {"x86-64-v3", "x86-64-v2"});
        REQUIRE(v3 != nullptr);
        CHECK(v3->hwcaps_subdir == "x86-64-v3");
        CHECK(v3->path.find("/opt/one/glibc-hwcaps/x86-64-v3/") == 0);
      } else {
        // The old format has no hwcap field: the first entry in file order wins.
        auto first = std::find_if(expected.begin(), expected.end(),
                                  [](const Listed& l) { return l.name == "libimga.so.1"; });
        CHECK(hit->path == first->path);
      }
      CHECK(cache.Lookup("libimga.so.1", CacheFlagsFor(183, true), {}) == nullptr);
      CHECK(cache.Lookup("libimgb.so.2", flags, {})->path == "/usr/lib/libimgb.so.2");
      CHECK(cache.Lookup("libnone.so", flags, {}) == nullptr);
    }
  }
}

TEST_CASE("old-format ld.so.cache built byte by byte", "[ld_so]") {
  std::string bytes = OldCache({{"libcudnn.so.8", "/usr/lib/x86_64-linux-gnu/libcudnn.so.8"},
                                {"libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"},
                                {"libfoo.so.1", "/usr/lib/aarch64-linux-gnu/libfoo.so.1"}},
                               0x0303);
  auto parsed = ParseLdCache(bytes);
  REQUIRE(parsed.has_value());
  CHECK(parsed->format == LdCacheFile::Format::kOld);
  REQUIRE(parsed->entries.size() == 3);
  CHECK(parsed->entries[0].name == "libcudnn.so.8");
  CHECK(parsed->entries[1].path == "/lib/x86_64-linux-gnu/libc.so.6");
  CHECK(parsed->Lookup("libc.so.6", 0x0303, {})->path == "/lib/x86_64-linux-gnu/libc.so.6");
  // ldconfig -p agrees when it can read it.
  if (testing::HaveProgram("ldconfig")) {
    testing::TempDir dir;
    testing::WriteFile(dir / "old.cache", bytes);
    CHECK(Parsed(*parsed) == LdconfigPrint(dir / "old.cache"));
  }
}

TEST_CASE("ld.so.cache corrupt or truncated: an error, never a crash", "[ld_so]") {
  std::string good =
      OldCache({{"liba.so.1", "/lib/liba.so.1"}, {"libb.so.2", "/lib/libb.so.2"}}, 0x0303);
  for (size_t n = 0; n < good.size(); ++n) {
    auto parsed = ParseLdCache(good.substr(0, n));
    if (n < 16 + 24) CHECK(!parsed.has_value());  // header or entries cut
  }
  CHECK(!ParseLdCache("not a cache at all").has_value());
  // nlibs claiming more entries than the file holds.
  std::string huge = good;
  huge[12] = '\xff';
  huge[13] = '\xff';
  CHECK(!ParseLdCache(huge).has_value());
  // A string offset past the table.
  std::string bad_offset = good;
  bad_offset[16 + 4] = '\x7f';
  auto parsed = ParseLdCache(bad_offset);
  REQUIRE(!parsed.has_value());
  CHECK(parsed.error().message.find("offset") != std::string::npos);
  // The new format, every byte flipped in turn: parse or fail, no crash, no hang.
  if (fs::exists("/etc/ld.so.cache")) {
    std::string real = testing::ReadFile("/etc/ld.so.cache").substr(0, 4096);
    for (size_t i = 0; i < 64; ++i) {
      std::string m = real;
      m[i] = static_cast<char>(m[i] ^ 0xff);
      (void)ParseLdCache(m);
      (void)ParseLdCache(m.substr(0, i * 7));
    }
  }
}

TEST_CASE("ld.so.cache lookup prefers the best glibc-hwcaps entry, then the first baseline",
          "[ld_so]") {
  LdCacheFile cache;
  auto add = [&](const std::string& path, const std::string& hw, uint64_t hwcap,
                 int32_t flags = 0x0303) {
    cache.entries.push_back({"libx.so.1", path, flags, 0, hwcap, hw});
  };
  add("/lib/aarch64/libx.so.1", "", 0, 0x0a03);
  add("/v2/libx.so.1", "x86-64-v2", kCacheHwcapExtension | 1);
  add("/v4/libx.so.1", "x86-64-v4", kCacheHwcapExtension | 0);
  add("/legacy/libx.so.1", "", 0x4);  // legacy hwcap bit: ignored
  add("/base/libx.so.1", "", 0);
  add("/base2/libx.so.1", "", 0);
  CHECK(cache.Lookup("libx.so.1", 0x0303, {})->path == "/base/libx.so.1");
  CHECK(cache.Lookup("libx.so.1", 0x0303, {"x86-64-v2"})->path == "/v2/libx.so.1");
  CHECK(cache.Lookup("libx.so.1", 0x0303, {"x86-64-v4", "x86-64-v3", "x86-64-v2"})->path ==
        "/v4/libx.so.1");
  CHECK(cache.Lookup("libx.so.1", 0x0a03, {"x86-64-v2"})->path == "/lib/aarch64/libx.so.1");
  CHECK(CacheFlagsFor(62, true) == 0x0303);
  CHECK(CacheFlagsFor(183, true) == 0x0a03);
}

// A tree holding whole files and symlinks, and the directories above them.
image::Tree TreeOf(const std::vector<std::pair<std::string, std::string>>& files,
                   const std::vector<std::pair<std::string, std::string>>& links = {}) {
  testing::FakeImage f;
  for (const auto& [path, text] : files) f.File(path, text);
  for (const auto& [path, target] : links) f.Link(path, target);
  return f.tree();
}

TEST_CASE("ld.so.conf: includes, comments, hwcap lines, duplicates, order", "[ld_so]") {
  image::Tree tree =
      TreeOf({{"/etc/ld.so.conf",
               "# comment\n  /opt/first/  # trailing\ninclude ld.so.conf.d/*.conf\n"
               "hwcap 1 nosegneg\nHWCAP 0 x\n/usr/local/lib=libc6\n/opt/first\n"},
              {"/etc/ld.so.conf.d/b.conf", "/opt/b\n\n"},
              {"/etc/ld.so.conf.d/a.conf", "/opt/a\ninclude nested/*.conf /etc/extra.conf\n"},
              {"/etc/ld.so.conf.d/nested/n.conf", "/opt/nested\n"},
              {"/etc/ld.so.conf.d/.hidden.conf", "/opt/hidden\n"},
              {"/etc/ld.so.conf.d/c.txt", "/opt/not-conf\n"},
              {"/etc/extra.conf", "\t/opt/extra\n"},
              {"/etc/cuda.conf", "/usr/local/cuda/lib64\n"}},
             {{"/etc/ld.so.conf.d/z.conf", "../cuda.conf"}});
  LdSoConf conf = ReadLdSoConf(tree);
  std::vector<std::string> dirs;
  for (const auto& d : conf.dirs) dirs.push_back(d.dir);
  CHECK(dirs == std::vector<std::string>{"/opt/first", "/opt/a", "/opt/nested", "/opt/extra",
                                         "/opt/b", "/usr/local/cuda/lib64", "/usr/local/lib"});
  CHECK(conf.dirs[0].file == "/etc/ld.so.conf");
  CHECK(conf.dirs[0].line == 2);
  CHECK(conf.dirs[2].file == "/etc/ld.so.conf.d/nested/n.conf");
  CHECK(conf.diagnostics.empty());
}

TEST_CASE("ld.so.conf include loop is bounded and reported", "[ld_so]") {
  image::Tree tree = TreeOf({{"/etc/ld.so.conf", "/opt/x\ninclude /etc/ld.so.conf\n"}});
  LdSoConf conf = ReadLdSoConf(tree);
  REQUIRE(conf.dirs.size() == 1);
  CHECK(!conf.diagnostics.empty());
  CHECK(ReadLdSoConf(image::Tree()).dirs.empty());
  CHECK(ReadLdSoConf(image::Tree()).diagnostics.empty());
}

bool Mentions(const LdSoConf& conf, std::string_view text) {
  return std::any_of(
      conf.diagnostics.begin(), conf.diagnostics.end(),
      [&](const util::Diagnostic& d) { return d.message.find(text) != std::string::npos; });
}

TEST_CASE("ld.so.conf include bomb: each file is read once", "[ld_so]") {
  // Each file includes all three: followed naively, the files read grow as 3^depth.
  std::vector<std::pair<std::string, std::string>> files = {
      {"/etc/ld.so.conf", "include ld.so.conf.d/*.conf\n"}};
  for (std::string name : {"a", "b", "c"})
    files.push_back({"/etc/ld.so.conf.d/" + name + ".conf", "include *.conf\n/opt/" + name + "\n"});
  LdSoConf conf = ReadLdSoConf(TreeOf(files));
  CHECK(conf.files.size() == 4);
  std::vector<std::string> dirs;
  for (const auto& d : conf.dirs) dirs.push_back(d.dir);
  CHECK(dirs == std::vector<std::string>{"/opt/c", "/opt/b", "/opt/a"});
  // a includes a; b includes a, b; c includes a, b, c: six loops, each reported once.
  CHECK(conf.diagnostics.size() == 6);
  CHECK(Mentions(conf, "ld.so.conf include loop: /etc/ld.so.conf.d/a.conf is already being read"));
}

TEST_CASE("ld.so.conf includes stop at a total budget, with a diagnostic", "[ld_so]") {
  // 300 files, each matched by each of 300 include lines: 90000 glob matches.
  std::vector<std::pair<std::string, std::string>> files;
  std::string conf_text;
  for (int i = 0; i < 300; ++i) conf_text += "include /etc/d/*.conf\n";
  files.push_back({"/etc/ld.so.conf", conf_text});
  for (int i = 0; i < 300; ++i)
    files.push_back({"/etc/d/" + std::to_string(i) + ".conf", "/opt/" + std::to_string(i) + "\n"});
  LdSoConf conf = ReadLdSoConf(TreeOf(files));
  CHECK(conf.files.size() == 301);
  CHECK(conf.dirs.size() == 300);
  REQUIRE(conf.diagnostics.size() == 1);
  CHECK(conf.diagnostics[0].path == "/etc/ld.so.conf");
  CHECK(Mentions(conf, "ld.so.conf includes stopped after 65536 lines, patterns and glob matches"));
}

TEST_CASE("ld.so.conf nesting and files read stop the run at their limits", "[ld_so]") {
  // /etc/ld.so.conf -> 1.conf -> 2.conf -> ... -> 5.conf.
  std::vector<std::pair<std::string, std::string>> files = {
      {"/etc/ld.so.conf", "include /etc/c/1.conf\n"}};
  for (int i = 1; i <= 5; ++i)
    files.push_back({"/etc/c/" + std::to_string(i) + ".conf",
                     "/opt/" + std::to_string(i) + "\n" +
                         (i < 5 ? "include " + std::to_string(i + 1) + ".conf\n" : "")});
  image::Tree tree = TreeOf(files);
  util::Limits limits;
  CHECK(ReadLdSoConf(tree, limits).dirs.size() == 5);
  limits.include_depth = 4;
  CHECK_THROWS_WITH(ReadLdSoConf(tree, limits),
                    "the ld.so.conf include nesting (/etc/c/5.conf) exceeds imgcheck's limit of 4 "
                    "(raise it with --max-include-depth)");
  limits = {};
  limits.include_files = 6;  // the root and five includes
  CHECK(ReadLdSoConf(tree, limits).files.size() == 6);
  limits.include_files = 5;
  CHECK_THROWS_WITH(ReadLdSoConf(tree, limits),
                    "the number of ld.so.conf files (/etc/c/5.conf) exceeds imgcheck's limit of 5 "
                    "(raise it with --max-include-files)");
}

TEST_CASE("ld.so.cache entries are bounded by what they expand to (records and strings)",
          "[ld_so]") {
  std::string name(100000, 'n');
  std::vector<std::pair<std::string, std::string>> libs(50, {name, "/lib/x.so"});
  std::string bytes = OldCache(libs, 0x0303);
  util::Limits limits;
  auto parsed = ParseLdCache(bytes, limits);
  REQUIRE(parsed);
  CHECK(parsed->entries.size() == 50);
  limits.metadata_bytes = 1u << 20;  // 50 entries of 100 kB: about 5 MB
  CHECK_THROWS_WITH(ParseLdCache(bytes, limits),
                    "the entries of ld.so.cache exceeds imgcheck's limit of 1 MiB (raise it with "
                    "--max-metadata-mb)");
}

}  // namespace
}  // namespace imgcheck::catalog
