// The streaming capturer: what it keeps must parse exactly like the whole file, for any chunking.
#include <catch2/catch.hpp>
#include <fstream>
#include <random>

#include "elf/elf.h"
#include "elf_builder.h"
#include "elf_test_util.h"
#include "image/layer_cache.h"
#include "support.h"

using namespace imgcheck;
using namespace imgcheck::elf;
using imgcheck::testing::Compile;
using imgcheck::testing::SharedObject;
using imgcheck::testing::TempDir;

namespace {

/// Feeds `bytes` in random chunk sizes (often tiny, sometimes large) until Feed says stop.
util::SparseFile CaptureInChunks(std::string_view bytes, std::mt19937& rng) {
  auto capturer = MakeCapturer();
  std::uniform_int_distribution<int> pick(0, 9);
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t n;
    switch (pick(rng)) {
      case 0:
        n = 1;
        break;
      case 1:
        n = 1 + rng() % 7;
        break;
      case 2:
      case 3:
        n = 1 + rng() % 4096;
        break;
      default:
        n = 1 + rng() % (1 << 20);
        break;
    }
    n = std::min(n, bytes.size() - pos);
    if (!capturer->Feed(bytes.substr(pos, n))) break;
    pos += n;
  }
  return capturer->Finish(bytes.size());
}

/// Streams the file at `path` from disk in 1 MiB chunks, as a layer reader would.
util::SparseFile CaptureFromDisk(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  auto capturer = MakeCapturer();
  std::string buffer(1 << 20, '\0');
  uint64_t size = 0;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    auto n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    size += n;
    if (!capturer->Feed(std::string_view(buffer.data(), n))) break;
  }
  while (in) {  // the rest of a file the capturer declined, only to learn its size
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    size += static_cast<uint64_t>(in.gcount());
  }
  return capturer->Finish(size);
}

ElfInfo ParseCaptured(const util::SparseFile& file) {
  auto r = Parse(file);
  if (!r) FAIL(r.error().message);
  REQUIRE(r->has_value());
  return **r;
}

bool SameSymbols(const std::vector<Symbol>& a, const std::vector<Symbol>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].version != b[i].version ||
        a[i].hidden_version != b[i].hidden_version || a[i].weak != b[i].weak)
      return false;
  return true;
}

void CheckSame(const ElfInfo& captured, const ElfInfo& whole) {
  CHECK(captured.is64 == whole.is64);
  CHECK(captured.big_endian == whole.big_endian);
  CHECK(captured.machine == whole.machine);
  CHECK(captured.interpreter == whole.interpreter);
  CHECK(captured.soname == whole.soname);
  CHECK(captured.needed == whole.needed);
  CHECK(captured.rpath == whole.rpath);
  CHECK(captured.runpath == whole.runpath);
  CHECK(captured.flags == whole.flags);
  CHECK(captured.flags_1 == whole.flags_1);
  CHECK(captured.build_id == whole.build_id);
  CHECK(SameSymbols(captured.exported, whole.exported));
  CHECK(SameSymbols(captured.imported, whole.imported));
  CHECK(captured.version_definitions == whole.version_definitions);
  REQUIRE(captured.version_needs.size() == whole.version_needs.size());
  for (size_t i = 0; i < whole.version_needs.size(); ++i)
    CHECK(captured.version_needs[i].versions == whole.version_needs[i].versions);
  REQUIRE(captured.fatbin.size() == whole.fatbin.size());
  for (size_t i = 0; i < whole.fatbin.size(); ++i) {
    CHECK(captured.fatbin[i].sm == whole.fatbin[i].sm);
    CHECK(captured.fatbin[i].kind == whole.fatbin[i].kind);
    CHECK(captured.fatbin[i].compressed == whole.fatbin[i].compressed);
  }
  CHECK(captured.problems == whole.problems);
}

void CheckCapturesLikeWhole(const std::filesystem::path& path, int rounds) {
  INFO(path.string());
  std::string bytes = imgcheck::testing::ReadFile(path);
  ElfInfo whole = ParseFile(path);
  std::mt19937 rng(static_cast<unsigned>(bytes.size()));
  for (int i = 0; i < rounds; ++i) {
    util::SparseFile kept = CaptureInChunks(bytes, rng);
    CHECK(kept.size() == bytes.size());
    CheckSame(ParseCaptured(kept), whole);
  }
}

}  // namespace

TEST_CASE("Captured parts of generated objects parse like the whole file") {
  TempDir dir;
  SharedObject dep;
  dep.soname = "libdep.so.1";
  dep.source =
      "int dep_fn(void) { return 1; }\nint dep_old(void) { return 0; }\n"
      "__asm__(\".symver dep_old,dep_fn@DEP_1\");\n";
  dep.version_script = "DEP_1 { global: dep_fn; local: *; }; DEP_2 { global: dep_fn; } DEP_1;\n";
  Compile(dep, dir / "libdep.so");
  SharedObject top;
  top.soname = "libtop.so.2";
  top.source = "int dep_fn(void);\nint top(void) { return dep_fn(); }\n";
  top.needed = {(dir / "libdep.so").string()};
  top.runpath = "$ORIGIN:/opt/x";
  top.extra_flags = {"-Wl,--build-id=sha1"};
  Compile(top, dir / "libtop.so");
  CheckCapturesLikeWhole(dir / "libdep.so", 20);
  CheckCapturesLikeWhole(dir / "libtop.so", 20);

  for (bool big : {false, true}) {
    fixture::ElfSpec spec;
    spec.is64 = !big;
    spec.big_endian = big;
    spec.soname = "libhand.so";
    spec.needed = {"liba.so"};
    spec.exported = {"x"};
    spec.build_id = "12345678";
    imgcheck::testing::WriteFile(dir / "hand.so", fixture::BuildElf(spec));
    CheckCapturesLikeWhole(dir / "hand.so", 20);
    // Tables after the dynamic section (patchelf's layout): kept once the dynamic section passed.
    spec.dynamic_first = true;
    imgcheck::testing::WriteFile(dir / "late.so", fixture::BuildElf(spec));
    CHECK(ParseFile(dir / "late.so").soname == "libhand.so");
    CheckCapturesLikeWhole(dir / "late.so", 20);
  }
}

TEST_CASE("Captured parts of system and CUDA libraries parse like the whole file") {
  int checked = 0;
  for (const char* path :
       {"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6", "/usr/local/cuda/lib/libcudnn.so.9",
        "/usr/local/cuda/lib/libcudnn_graph.so.9", "/usr/local/cuda/lib/libcudart.so.13"}) {
    if (!std::filesystem::exists(path)) continue;
    CheckCapturesLikeWhole(path, 3);
    ++checked;
  }
  if (checked == 0) imgcheck::testing::Skip("no system libraries found to capture");
}

// A library whose .dynstr runs past the prefix the capturer keeps (a 4 KiB limit standing for
// the 16 MiB that TensorFlow's 50 MiB table passes): 80 long names, then the ones that matter.
fixture::ElfSpec LongStrings() {
  fixture::ElfSpec spec;
  spec.soname = "libbig.so.1";
  spec.needed = {"libdep.so"};
  for (int i = 0; i < 80; ++i)
    spec.exported.push_back("big_filler_" + std::to_string(i) + "_" + std::string(100, 'x'));
  spec.exported.push_back("ncclCommRegister");
  spec.imported = {"late_import_" + std::string(60, 'y')};
  return spec;
}

// Streams `bytes` in chunks of `chunk` bytes through a capturer that keeps 4 KiB of the start
// (a stream in large chunks would pass the small file's tables whole, which it may keep).
util::SparseFile CaptureInSmallChunks(std::string_view bytes, size_t chunk) {
  auto capturer = MakeCapturer(CaptureLimits{4096});
  for (size_t pos = 0; pos < bytes.size(); pos += chunk)
    if (!capturer->Feed(bytes.substr(pos, chunk))) break;
  return capturer->Finish(bytes.size());
}

TEST_CASE("Names past the kept prefix are hashed as they stream and bind like the whole file") {
  std::string bytes = fixture::BuildElf(LongStrings());
  ElfInfo whole = ParseCaptured(util::SparseFile::Whole(bytes));
  REQUIRE(whole.exported.size() == 81);
  for (size_t chunk : {1, 7, 64, 333, 1024}) {
    INFO("chunk " << chunk);
    util::SparseFile kept = CaptureInSmallChunks(bytes, chunk);
    ElfInfo captured = ParseCaptured(kept);
    CHECK(captured.symbols_unread.empty());
    CHECK(captured.has_export_keys);
    CHECK(captured.exported.size() < whole.exported.size());  // the rest: hashes only
    CHECK(ExportKeys(captured) == ExportKeys(whole));
    REQUIRE(captured.imported.size() == 1);
    CHECK(SymbolNameHash(captured.imported[0]) == NameHash(whole.imported[0].name));
    CHECK(captured.needed == whole.needed);
  }
}

// The dynamic section's names in the middle of a .dynstr that runs past the kept prefix (4 KiB
// here, standing for 16 MiB), more than the last kRing (4 KiB) before its end, as TensorFlow
// 2.21's libtensorflow_framework.so.2 has them (15.5 MB of strings, its NEEDED names 20 KB before
// the end, its DT_RUNPATH 20 KB long).
fixture::ElfSpec NamesMidTable(std::vector<std::string>* runpath = nullptr) {
  fixture::ElfSpec spec;
  spec.soname = "libtensorflow_framework.so.2";
  spec.needed = {"libpthread.so.0", "ld-linux-x86-64.so.2", "/opt/vendor/libabs.so"};
  spec.rpath = "/opt/rpath/lib";
  for (int i = 0; i < 300; ++i) {  // 7.2 KB: longer than what is kept of the table's end
    std::string dir = "$ORIGIN/../nvidia/lib" + std::to_string(i);
    spec.runpath += (i ? ":" : "") + dir;
    if (runpath) runpath->push_back(dir);
  }
  spec.filler_strings = 64u << 10;  // before the names
  for (int i = 0; i < 80; ++i)      // 9 KB after them
    spec.exported.push_back("tf_" + std::to_string(i) + "_" + std::string(100, 'x'));
  return spec;
}

/// What the layer cache stores of a reading (its extents and annex) and gives back.
util::SparseFile ThroughLayerCache(const util::SparseFile& kept) {
  image::LayerContents layer;
  layer.entries.push_back({"/lib/libtensorflow_framework.so.2", image::EntryKind::kFile, 0644,
                           kept.size(), "", std::make_shared<util::SparseFile>(kept), false});
  std::optional<image::LayerContents> back = image::ParseLayer(image::SerializeLayer(layer, 0), 0);
  REQUIRE(back);
  REQUIRE(back->entries.size() == 1);
  REQUIRE(back->entries[0].content);
  return *back->entries[0].content;
}

TEST_CASE("The dynamic section's names past the kept prefix are kept whole as they stream") {
  std::vector<std::string> runpath;
  fixture::ElfSpec spec = NamesMidTable(&runpath);
  std::string bytes = fixture::BuildElf(spec);
  const ElfInfo whole = ParseCaptured(util::SparseFile::Whole(bytes));
  REQUIRE(spec.runpath.size() > 7000);
  // The names lie past the prefix and more than 4 KiB before the end of the file.
  const size_t needed_at = bytes.find(std::string("\0libpthread.so.0\0", 17));
  const size_t runpath_at = bytes.find(spec.runpath);
  REQUIRE(needed_at != std::string::npos);
  REQUIRE(runpath_at != std::string::npos);
  CHECK(needed_at > 4096);
  CHECK(bytes.size() - (runpath_at + spec.runpath.size()) > 8192);
  for (size_t chunk : {1, 7, 64, 333, 4096, 65536}) {
    INFO("chunk " << chunk);
    util::SparseFile kept = CaptureInSmallChunks(bytes, chunk);
    CHECK(kept.captured_bytes() < spec.filler_strings);  // not the table's middle
    for (const util::SparseFile& reading : {kept, ThroughLayerCache(kept)}) {
      ElfInfo captured = ParseCaptured(reading);
      CHECK(captured.problems.empty());
      CHECK(captured.names_unread.empty());
      CHECK(captured.needed == std::vector<std::string>{"libpthread.so.0", "ld-linux-x86-64.so.2",
                                                        "/opt/vendor/libabs.so"});
      CHECK(captured.soname == "libtensorflow_framework.so.2");
      CHECK(captured.rpath == std::vector<std::string>{"/opt/rpath/lib"});
      CHECK(captured.has_runpath);
      CHECK(captured.runpath == runpath);
      CHECK(captured.symbols_unread.empty());
      CHECK(captured.exported.size() < whole.exported.size());  // the rest: hashes only
      CHECK(ExportKeys(captured) == ExportKeys(whole));
    }
  }
}

TEST_CASE("A dynamic section's name that was not captured is left out and said so") {
  fixture::ElfSpec spec = NamesMidTable();
  // No soname, path or version: a name the capturer has no reason to keep.
  spec.needed = {"libpthread.so.0", "liboddname"};
  std::string bytes = fixture::BuildElf(spec);
  const size_t dynstr = bytes.find(std::string("\0filler_0_", 10));
  const size_t odd = bytes.find(std::string("\0liboddname\0", 12));
  REQUIRE(dynstr != std::string::npos);
  REQUIRE(odd != std::string::npos);
  ElfInfo captured = ParseCaptured(CaptureInSmallChunks(bytes, 4096));
  CHECK(captured.needed == std::vector<std::string>{"libpthread.so.0"});  // never ""
  const std::string problem = "DT_NEEDED at .dynstr offset 0x" + [&] {
    char hex[32];
    std::snprintf(hex, sizeof hex, "%zx", odd + 1 - dynstr);
    return std::string(hex);
  }() + " not captured";
  CHECK(captured.names_unread == std::vector<std::string>{problem});
  CHECK(std::find(captured.problems.begin(), captured.problems.end(), problem) !=
        captured.problems.end());
  CHECK(captured.symbols_unread == problem);  // so no symbol of it is judged unbound
  CHECK(captured.soname == "libtensorflow_framework.so.2");
}

TEST_CASE("A name that can be neither kept nor hashed says the symbols were not read whole") {
  fixture::ElfSpec spec = LongStrings();
  // A control character ends the hashing; the 5,000 bytes of its name before it are not kept.
  spec.exported.insert(spec.exported.begin() + 60, std::string(5000, 'z') + "\x01z");
  std::string bytes = fixture::BuildElf(spec);
  ElfInfo captured = ParseCaptured(CaptureInSmallChunks(bytes, 256));
  CHECK_FALSE(captured.symbols_unread.empty());
  CHECK(ParseCaptured(util::SparseFile::Whole(bytes)).symbols_unread.empty());
}

TEST_CASE("The capturer declines non-ELF files after four bytes") {
  auto c = MakeCapturer();
  CHECK(c->Feed("#"));
  CHECK(c->Feed("!/"));
  CHECK_FALSE(c->Feed("bin/sh\n"));
  util::SparseFile kept = c->Finish(12);
  CHECK(kept.captured_bytes() <= 4);
  auto r = Parse(kept);
  REQUIRE(r);
  CHECK_FALSE(r->has_value());

  auto whole = MakeCapturer();
  CHECK_FALSE(whole->Feed("PK\x03\x04 and a zip file"));
}

TEST_CASE("The capturer stops at a corrupt ELF header and Parse reports it") {
  fixture::ElfSpec spec;
  spec.soname = "libcorrupt.so";
  std::string bytes = fixture::BuildElf(spec);
  bytes[5] = 7;  // EI_DATA: neither little nor big endian
  auto c = MakeCapturer();
  bool more = true;
  for (size_t pos = 0; pos < bytes.size() && more; pos += 5)
    more = c->Feed(std::string_view(bytes).substr(pos, 5));
  CHECK_FALSE(more);
  util::SparseFile kept = c->Finish(bytes.size());
  CHECK(kept.captured_bytes() <= 64 + 5);
  auto r = Parse(kept);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("offset 5") != std::string::npos);
}

TEST_CASE("Tables in a PT_LOAD of their own past the first 16 MiB are kept") {
  // torch 2.4's vendored libcusparseLt: patchelf moved .dynstr and .gnu.hash, with the dynamic
  // section after them, into a small segment at the end of a 43 MB file.
  TempDir dir;
  fixture::ElfSpec spec;
  spec.soname = "libcusparseLt.so.0";
  spec.needed = {"libcublas.so.12"};
  spec.exported = {"cusparseLtInit"};
  spec.tables_at = 20u << 20;
  imgcheck::testing::WriteFile(dir / "late.so", fixture::BuildElf(spec));
  ElfInfo whole = ParseFile(dir / "late.so");
  REQUIRE(whole.soname == "libcusparseLt.so.0");
  CHECK(whole.problems.empty());
  CheckCapturesLikeWhole(dir / "late.so", 3);
}

TEST_CASE("Strings in a large PT_LOAD of their own are hashed as they stream") {
  // torch 2.10's libcusparseLt.so.0: patchelf moved a 25 MiB .dynstr, with the dynamic section,
  // into a segment at the end of the file, too large to keep; the section headers before it
  // say where the strings start.
  fixture::ElfSpec spec;
  spec.soname = "libcusparseLt.so.0";
  spec.needed = {"libcublas.so.12"};
  spec.runpath = "$ORIGIN";
  for (int i = 0; i < 700; ++i)
    spec.exported.push_back("cusparseLt_" + std::to_string(i) + "_" + std::string(8000, 'x'));
  spec.imported = {"cublasLtMatmul", "localtime"};
  spec.exported.push_back("cusparseLt_localtime");
  spec.tables_at = 1u << 20;
  spec.section_headers = true;
  spec.merge_tails = true;  // the import "localtime" is the tail of an export's name
  std::string bytes = fixture::BuildElf(spec);
  ElfInfo whole = ParseCaptured(util::SparseFile::Whole(bytes));
  REQUIRE(whole.problems.empty());
  REQUIRE(whole.exported.size() == 701);
  REQUIRE(whole.imported.size() == 2);
  for (size_t chunk : {4096, 65536, 1 << 20}) {
    INFO("chunk " << chunk);
    util::SparseFile kept = CaptureInSmallChunks(bytes, chunk);
    CHECK(kept.captured_bytes() < (1u << 20));  // of a 6.6 MB file
    ElfInfo captured = ParseCaptured(kept);
    CHECK(captured.problems.empty());
    CHECK(captured.symbols_unread.empty());
    CHECK(ExportKeys(captured) == ExportKeys(whole));
    REQUIRE(captured.imported.size() == 2);
    CHECK(SymbolNameHash(captured.imported[0]) == NameHash("cublasLtMatmul"));
    CHECK(SymbolNameHash(captured.imported[1]) == NameHash("localtime"));
    CHECK(captured.soname == whole.soname);
    CHECK(captured.needed == whole.needed);
    CHECK(captured.runpath == whole.runpath);
  }
  // nvidia-cusparselt-cu12 0.6.3's libcusparseLt.so.0: the DT_NEEDED names 27 KB before the end
  // of its moved 9 MB .dynstr, past the first and last 4 KiB.
  fixture::ElfSpec middle = spec;
  middle.filler_strings = 5u << 20;
  middle.exported.resize(3);  // 24 KB of names after the dynamic section's
  bytes = fixture::BuildElf(middle);
  whole = ParseCaptured(util::SparseFile::Whole(bytes));
  REQUIRE(whole.needed == std::vector<std::string>{"libcublas.so.12"});
  ElfInfo captured = ParseCaptured(CaptureInSmallChunks(bytes, 65536));
  CHECK(captured.problems.empty());
  CHECK(captured.needed == whole.needed);
  CHECK(captured.soname == whole.soname);
  CHECK(captured.runpath == whole.runpath);
  // 80 KB of names after them: past the last 64 KiB kept too, they are kept as they stream.
  middle.exported = spec.exported;
  middle.exported.resize(10);
  bytes = fixture::BuildElf(middle);
  captured = ParseCaptured(CaptureInSmallChunks(bytes, 65536));
  CHECK(captured.problems.empty());
  CHECK(captured.needed == std::vector<std::string>{"libcublas.so.12"});
  CHECK(captured.soname == "libcusparseLt.so.0");
  CHECK(captured.runpath == std::vector<std::string>{"$ORIGIN"});
  // Without section headers nothing says where they start before the dynamic section: the
  // symbols are said to be unread, as before.
  spec.section_headers = false;
  bytes = fixture::BuildElf(spec);
  CHECK_FALSE(ParseCaptured(CaptureInSmallChunks(bytes, 65536)).symbols_unread.empty());
}

TEST_CASE("The capturer keeps little of a large object") {
  // 40 MiB of read-only data in the first PT_LOAD (no separate code segment), so the tables sit
  // before a long stretch the capturer must not keep.
  TempDir dir;
  SharedObject so;
  so.soname = "libbig.so";
  so.source = "static const char big[40 << 20] = {1};\nconst char* get(void) { return big; }\n";
  so.extra_flags = {"-Wl,-z,noseparate-code", "-Wl,--build-id"};
  Compile(so, dir / "libbig.so");
  std::mt19937 rng(7);
  std::string bytes = imgcheck::testing::ReadFile(dir / "libbig.so");
  util::SparseFile kept = CaptureInChunks(bytes, rng);
  CHECK(kept.captured_bytes() < uint64_t{64} * 1024);
  CheckSame(ParseCaptured(kept), ParseFile(dir / "libbig.so"));
}

TEST_CASE("The capturer keeps little of the large CUDA libraries") {
  bool any = false;
  for (const char* path : {"/usr/local/cuda/lib/libcublasLt.so.13",
                           "/usr/local/cuda/lib/libcudnn_engines_precompiled.so.9"}) {
    if (!std::filesystem::exists(path)) continue;
    any = true;
    INFO(path);
    util::SparseFile kept = CaptureFromDisk(path);
    ElfInfo info = ParseCaptured(kept);
    CHECK(info.problems.empty());
    CHECK_FALSE(info.soname.empty());
    CHECK_FALSE(info.exported.empty());
    CHECK_FALSE(info.fatbin.empty());
    CHECK(kept.captured_bytes() * 100 < kept.size());  // well under 1% of the file
    // The same file, whole: the capturer lost nothing Parse reads.
    CheckSame(info, ParseFile(path));
  }
  if (!any) imgcheck::testing::Skip("no large CUDA library here");
}
