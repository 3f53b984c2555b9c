#include <sys/stat.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "support.h"
#include "util/error.h"
#include "util/file.h"
#include "util/names.h"
#include "util/parallel.h"
#include "util/path.h"
#include "util/reader.h"
#include "util/sha256.h"
#include "util/sparse_file.h"
#include "util/text.h"

using namespace imgcheck::util;

TEST_CASE("NormalizePath clamps .. at the root") {
  CHECK(NormalizePath("a/../../b") == "/b");
  CHECK(NormalizePath("/../../etc//passwd/.") == "/etc/passwd");
  CHECK(NormalizePath("") == "/");
  CHECK(JoinPath("/usr/lib", "../lib64/x") == "/usr/lib64/x");
  CHECK(JoinPath("/usr/lib", "/opt") == "/opt");
  CHECK(DirName("/a/b") == "/a");
  CHECK(DirName("/a") == "/");
  CHECK(BaseName("/a/b") == "b");
  CHECK(Split("a::b", ':') == std::vector<std::string>{"a", "", "b"});
  CHECK(GlobMatch("/etc/ld.so.conf.d/*.conf", "/etc/ld.so.conf.d/x.conf"));
  CHECK_FALSE(GlobMatch("/etc/*.conf", "/etc/a/b.conf"));
}

TEST_CASE("Reader never reads past the end") {
  std::string bytes = "\x01\x02\x03\x04\x05";
  Reader le(bytes);
  CHECK(le.Read<uint32_t>() == 0x04030201u);
  CHECK_FALSE(le.Read<uint16_t>().has_value());
  CHECK(le.Read<uint8_t>() == 5);
  Reader be(bytes, true);
  CHECK(be.Read<uint16_t>() == 0x0102);
  CHECK_FALSE(be.Seek(6));
  CHECK(CheckedAdd(UINT64_MAX, 1) == std::nullopt);
  CHECK(CheckedMul(1ull << 40, 1ull << 30) == std::nullopt);
  CHECK(CString(std::string_view("ab\0cd", 5), 3) == std::nullopt);  // unterminated
  CHECK(CString(std::string_view("ab\0cd", 5), 0) == "ab");
  CHECK(Slice("abc", 2, 2) == std::nullopt);
}

TEST_CASE("SparseFile merges extents and answers only captured ranges") {
  SparseFile f(100);
  f.Add(10, "abcd");
  f.Add(20, "wxyz");
  CHECK(f.View(10, 4) == "abcd");
  CHECK_FALSE(f.View(12, 10).has_value());
  f.Add(14, "012345");  // fills the gap, touching both sides
  REQUIRE(f.extents().size() == 1);
  CHECK(f.View(10, 14) == "abcd012345wxyz");
  CHECK(f.ViewFrom(22) == "yz");
  CHECK_FALSE(f.complete());
  CHECK(SparseFile::Whole("hello").complete());
}

TEST_CASE("SparseFile grows an extent in place and keeps ranges exact in any order") {
  std::string whole;
  for (int i = 0; i < 5000; ++i) whole += static_cast<char>('a' + i % 26);
  SparseFile in_order(whole.size());
  for (size_t at = 0; at < whole.size(); at += 7)
    in_order.Add(at, std::string_view(whole).substr(at, 7));
  REQUIRE(in_order.extents().size() == 1);
  CHECK(in_order.extents()[0].bytes == whole);

  SparseFile scattered(whole.size());
  scattered.Take(4000, whole.substr(4000, 500));  // taken over
  scattered.Add(100, whole.substr(100, 50));
  scattered.Add(3000, whole.substr(3000, 10));
  scattered.Add(120, whole.substr(120, 3900));  // spans 100.., 3000.. and touches 4000
  REQUIRE(scattered.extents().size() == 1);
  CHECK(scattered.View(100, 4400) == std::string_view(whole).substr(100, 4400));
  CHECK_FALSE(scattered.View(99, 2).has_value());
}

TEST_CASE("Sha256 matches the known digest of 'abc'") {
  CHECK(Sha256Digest("abc") ==
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("Md5 matches the known digest of 'abc', in one span or several") {
  CHECK(Md5Hex("abc") == "900150983cd24fb0d6963f7d28e17f72");
  Md5 h;
  h.Update("a");
  h.Update("bc");
  CHECK(h.HexDigest() == Md5Hex("abc"));
  CHECK(Md5Hex("") == "d41d8cd98f00b204e9800998ecf8427e");
}

TEST_CASE("AsyncSha256 hashes the spans it is given, in order, as Sha256 does") {
  std::string whole;
  for (uint64_t i = 0; whole.size() < (3 << 20); ++i) whole += std::to_string(i * 7919) + ",";
  // Two buffers reused in turn, each overwritten only after Wait() on its last span: the
  // pattern of the layer readers.
  std::string slots[2];
  uint64_t tickets[2] = {0, 0};
  AsyncSha256 async;
  size_t at = 0;
  for (int k = 0; at < whole.size(); ++k) {
    size_t n = std::min<size_t>(whole.size() - at, 1 + (k * 65537) % 300000);
    std::string& slot = slots[k % 2];
    async.Wait(tickets[k % 2]);
    slot.assign(whole, at, n);
    tickets[k % 2] = async.Add(slot);
    at += n;
  }
  CHECK("sha256:" + async.HexDigest() == Sha256Digest(whole));
}

TEST_CASE("AsyncSha256 can be abandoned with spans still queued") {
  std::string big(8 << 20, 'x');
  {
    AsyncSha256 async;
    for (int i = 0; i < 64; ++i) async.Add(big);
  }  // joins without hashing the rest
  AsyncSha256 empty;
  CHECK("sha256:" + empty.HexDigest() == Sha256Digest(""));
}

TEST_CASE("Trim drops ASCII whitespace at both ends only") {
  CHECK(Trim(" \t a b \r\n") == "a b");
  CHECK(Trim("\v\f") == "");
  CHECK(Trim("") == "");
  CHECK(Trim("x") == "x");
}

TEST_CASE("ParseInt takes all of the text or nothing, and never overflows") {
  CHECK(ParseInt<int>("42") == 42);
  CHECK(ParseInt<int>("-7") == -7);
  CHECK(ParseInt<int>("2147483647") == 2147483647);
  CHECK_FALSE(ParseInt<int>("2147483648"));
  CHECK_FALSE(ParseInt<unsigned>("-1"));
  CHECK(ParseInt<uint64_t>("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(ParseInt<uint64_t>("18446744073709551616"));
  CHECK_FALSE(ParseInt<long>(std::string(400, '9')));
  for (const char* bad : {"", " 1", "1 ", "+1", "1x", "0x10", "1.0", "-"})
    CHECK_FALSE(ParseInt<long>(bad));
}

TEST_CASE("ReadFile reads a whole host file, or says why not") {
  imgcheck::testing::TempDir tmp;
  const std::filesystem::path& dir = tmp.path();
  std::string big(200000, 'x');
  imgcheck::testing::WriteFile(dir / "f", big);
  CHECK(ReadFile(dir / "f").value() == big);
  CHECK(ReadFile(dir / "f", big.size()).value() == big);
  auto over = ReadFile(dir / "f", 1000);
  REQUIRE_FALSE(over);
  CHECK(over.error().message == (dir / "f").string() + " is larger than 1000 bytes");
  auto missing = ReadFile(dir / "none");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message ==
        "cannot read " + (dir / "none").string() + ": No such file or directory");
  auto directory = ReadFile(dir);
  REQUIRE_FALSE(directory);
  CHECK(directory.error().message == "cannot read " + dir.string() + ": Is a directory");
}

TEST_CASE("OpenRegularBeneath opens regular files inside a directory and nothing else") {
  namespace fs = std::filesystem;
  imgcheck::testing::TempDir tmp;
  fs::path root = tmp / "root";
  fs::create_directories(root / "blobs");
  imgcheck::testing::WriteFile(root / "blobs/a", "bytes");
  imgcheck::testing::WriteFile(tmp / "outside", "host");
  fs::create_symlink(tmp / "outside", root / "blobs/out");
  fs::create_symlink("a", root / "blobs/near");  // even a link that stays inside
  fs::create_symlink(root / "blobs", root / "linked");
  REQUIRE(mkfifo((root / "blobs/fifo").c_str(), 0600) == 0);
  auto reason = [&](const std::string& name) {
    int error = 0;
    auto f = OpenRegularBeneath(root, name, &error);
    REQUIRE_FALSE(f);
    CHECK(error != 0);
    return f.error().message;
  };
  auto ok = OpenRegularBeneath(root, "./blobs//a");
  REQUIRE(ok);
  CHECK(ok->size == 5);
  CHECK(ok->fd.get() >= 0);
  const std::string link = "is a symbolic link or lies behind one";
  CHECK(reason("blobs/out") ==
        (root / "blobs/out").string() + ": " + link + " (links are not followed here)");
  CHECK_THAT(reason("blobs/near"), Catch::Matchers::Contains(link));
  CHECK_THAT(reason("linked/a"), Catch::Matchers::Contains(link));
  CHECK(reason("blobs/fifo") == (root / "blobs/fifo").string() + ": is a FIFO, not a regular file");
  CHECK_THAT(reason("blobs"), Catch::Matchers::EndsWith("is a directory, not a regular file"));
  CHECK_THAT(reason("../outside"), Catch::Matchers::EndsWith("leads outside its directory"));
  CHECK_THAT(reason("/etc/passwd"), Catch::Matchers::EndsWith("leads outside its directory"));
  int error = 0;
  CHECK_FALSE(OpenRegularBeneath(root, "blobs/none", &error));
  CHECK(error == ENOENT);
  // A file the user names: links followed, still regular files only.
  CHECK(OpenRegular(root / "blobs/out"));
  CHECK_FALSE(OpenRegular(root / "blobs/fifo"));
  CHECK_FALSE(OpenRegular("/dev/zero"));
}

TEST_CASE("Expected<void> carries only success or an error") {
  auto check = [](int v) -> Expected<void> {
    if (v < 0) return MakeError("negative");
    return {};
  };
  CHECK(check(1).has_value());
  REQUIRE_FALSE(check(-1));
  CHECK(check(-1).error().message == "negative");
}

namespace {

enum class Fruit : uint8_t { kApple, kPear, kPlum };
constexpr auto kFruitNames = std::to_array<EnumName<Fruit>>(
    {{Fruit::kApple, "apple"}, {Fruit::kPear, "pear"}, {Fruit::kPlum, "plum"}});
// What NamesEvery must refuse: a missing enumerator, a value no enumerator has, a name twice.
constexpr auto kNoPlum =
    std::to_array<EnumName<Fruit>>({{Fruit::kApple, "apple"}, {Fruit::kPear, "pear"}});
constexpr auto kCastNotPlum = std::to_array<EnumName<Fruit>>(
    {{Fruit::kApple, "apple"}, {Fruit::kPear, "pear"}, {static_cast<Fruit>(7), "plum"}});
constexpr auto kPearTwice = std::to_array<EnumName<Fruit>>(
    {{Fruit::kApple, "apple"}, {Fruit::kPear, "pear"}, {Fruit::kPlum, "pear"}});

}  // namespace

TEST_CASE("A name table answers both ways and names every enumerator") {
  static_assert(NamesEvery(kFruitNames));
  static_assert(!NamesEvery(kNoPlum));
  static_assert(!NamesEvery(kCastNotPlum));
  static_assert(!NamesEvery(kPearTwice));
  for (const auto& [value, name] : kFruitNames) {
    CHECK(Name(kFruitNames, value) == name);
    CHECK(Parse(kFruitNames, name) == value);
  }
  CHECK(Name(kFruitNames, static_cast<Fruit>(9)) == "unknown");
  CHECK(Name(kFruitNames, static_cast<Fruit>(9), "?") == "?");
  CHECK_FALSE(Parse(kFruitNames, "Pear"));
  CHECK_FALSE(Parse(kFruitNames, ""));
}

TEST_CASE("ParallelFor runs each index once and rethrows the lowest failing index") {
  for (int threads : {1, 2, 8}) {
    std::vector<std::atomic<int>> runs(1000);
    ParallelFor(runs.size(), threads, [&](size_t i) { ++runs[i]; });
    for (const auto& r : runs) REQUIRE(r == 1);
    ParallelFor(0, threads, [](size_t) { FAIL("no index to run"); });
    // 300 and 700 fail: a loop would stop at 300 having run all below it.
    std::vector<std::atomic<int>> ran(1000);
    try {
      ParallelFor(ran.size(), threads, [&](size_t i) {
        ++ran[i];
        if (i == 300 || i == 700) throw std::runtime_error("index " + std::to_string(i));
      });
      FAIL("no exception");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "index 300");
    }
    for (size_t i = 0; i <= 300; ++i) REQUIRE(ran[i] == 1);
  }
}
