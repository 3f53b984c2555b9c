#include <catch2/catch.hpp>

#include "util/path.h"
#include "util/reader.h"
#include "util/sha256.h"
#include "util/sparse_file.h"

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

TEST_CASE("Sha256 matches the known digest of 'abc'") {
  CHECK(Sha256Digest("abc") ==
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
