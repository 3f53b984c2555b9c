// CUDA fatbin: containers written by the test itself into .nv_fatbin of a generated object, then
// (where the toolkit exists) what nvcc really emits and what cuDNN ships.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "elf/elf.h"
#include "elf_builder.h"
#include "elf_test_util.h"
#include "support.h"

using namespace imgcheck;
using namespace imgcheck::elf;
using fixture::FatbinSpecEntry;
using imgcheck::testing::Compile;
using imgcheck::testing::Run;
using imgcheck::testing::SharedObject;
using imgcheck::testing::TempDir;

namespace {

/// C source placing each container in .nv_fatbin, as nvcc's host stub does.
std::string FatbinSource(const std::vector<std::string>& containers) {
  std::ostringstream c;
  for (size_t i = 0; i < containers.size(); ++i) {
    c << "__attribute__((section(\".nv_fatbin\"), aligned(8), used))\n"
      << "static const unsigned char fatbin" << i << "[] = {";
    for (unsigned char b : containers[i]) c << static_cast<unsigned>(b) << ",";
    c << "};\n";
  }
  c << "int host_fn(void) { return 0; }\n";
  return c.str();
}

/// "sm_80 cubin", "sm_90 cubin z", "sm_90 ptx 8.8": one line per entry, sorted.
std::multiset<std::string> Describe(const std::vector<FatbinEntry>& entries, bool with_version) {
  std::multiset<std::string> out;
  for (const auto& e : entries) {
    std::string s =
        "sm_" + std::to_string(e.sm) + (e.kind == FatbinEntry::Kind::kPtx ? " ptx" : " cubin");
    if (with_version && e.kind == FatbinEntry::Kind::kPtx)
      s += " " + std::to_string(e.version_major) + "." + std::to_string(e.version_minor);
    if (e.compressed) s += " z";
    out.insert(s);
  }
  return out;
}

}  // namespace

TEST_CASE("Parse lists the entries of fatbin containers in .nv_fatbin") {
  std::vector<FatbinSpecEntry> first = {
      {false, 80, false, 1, 8, "cubin for sm_80"},
      {false, 90, true, 1, 8, "zstd cubin for sm_90!"},
      {true, 90, false, 8, 8, ".version 8.8\n.target sm_90\n"},
  };
  std::vector<FatbinSpecEntry> second = {{false, 120, true, 1, 8, std::string(300, 'x')}};
  TempDir dir;
  SharedObject so;
  so.soname = "libkernels.so";
  so.source = FatbinSource({fixture::BuildFatbin(first), fixture::BuildFatbin(second)});
  Compile(so, dir / "libkernels.so");

  ElfInfo info = ParseFile(dir / "libkernels.so");
  CHECK(info.problems.empty());
  CHECK(Describe(info.fatbin, true) == std::multiset<std::string>{"sm_80 cubin", "sm_90 cubin z",
                                                                  "sm_90 ptx 8.8",
                                                                  "sm_120 cubin z"});

  // Streamed in odd chunk sizes, the capturer keeps the container and entry headers only.
  std::string bytes = imgcheck::testing::ReadFile(dir / "libkernels.so");
  auto capturer = MakeCapturer();
  for (size_t pos = 0; pos < bytes.size(); pos += 3)
    capturer->Feed(std::string_view(bytes).substr(pos, 3));
  auto r = Parse(capturer->Finish(bytes.size()));
  REQUIRE(r);
  REQUIRE(r->has_value());
  CHECK(Describe((*r)->fatbin, true) == Describe(info.fatbin, true));
}

TEST_CASE("Without section headers fatbin containers are found by their magic") {
  fixture::ElfSpec spec;
  spec.soname = "libnoshdr.so";
  spec.fatbin = fixture::BuildFatbin({{false, 75, false, 1, 8, "a"}, {true, 75, true, 7, 5, "b"}});
  auto r = Parse(util::SparseFile::Whole(fixture::BuildElf(spec)));
  REQUIRE(r);
  REQUIRE(r->has_value());
  CHECK(Describe((*r)->fatbin, true) ==
        std::multiset<std::string>{"sm_75 cubin", "sm_75 ptx 7.5 z"});
}

TEST_CASE("A corrupt fatbin entry is a problem, not a failure") {
  std::string container = fixture::BuildFatbin({{false, 86, false, 1, 8, "payload"}});
  container[16 + 8] = '\x7f';  // payload size now runs past the container
  TempDir dir;
  SharedObject so;
  so.source = FatbinSource({container});
  Compile(so, dir / "libbad.so");
  ElfInfo info = ParseFile(dir / "libbad.so");
  CHECK(info.fatbin.empty());
  REQUIRE(info.problems.size() == 1);
  CHECK(info.problems[0].find("corrupt fatbin entry") != std::string::npos);
}

TEST_CASE("Parse reads what nvcc emits") {
  const char* nvcc = "/usr/local/cuda/bin/nvcc";
  if (!std::filesystem::exists(nvcc)) return imgcheck::testing::Skip("nvcc not installed");
  TempDir dir;
  imgcheck::testing::WriteFile(
      dir / "k.cu",
      "__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n"
      "extern \"C\" void launch(float* x) { scale<<<1, 32>>>(x, 2.0f); }\n");
  auto r = Run(std::string(nvcc) + " -shared -Xcompiler -fPIC -o '" + (dir / "libk.so").string() +
               "' '" + (dir / "k.cu").string() +
               "' -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"
               " -gencode arch=compute_90,code=compute_90 2>&1");
  if (r.status != 0) return imgcheck::testing::Skip("nvcc cannot build here: " + r.output);
  ElfInfo info = ParseFile(dir / "libk.so");
  CHECK(info.problems.empty());
  // nvcc links a second container (the device-link stub, cubins only) beside the kernel's own, so
  // the distinct entries are compared.
  std::set<std::string> kinds;
  for (const auto& e : info.fatbin)
    kinds.insert("sm_" + std::to_string(e.sm) +
                 (e.kind == FatbinEntry::Kind::kPtx ? " ptx" : " cubin"));
  CHECK(kinds == std::set<std::string>{"sm_80 cubin", "sm_90 cubin", "sm_90 ptx"});
  for (const auto& e : info.fatbin)
    if (e.kind == FatbinEntry::Kind::kPtx)
      CHECK(e.version_major >= 8);  // CUDA 13 emits PTX ISA 9.x
}

TEST_CASE("Parse lists the architectures of cuDNN's precompiled engines") {
  const char* path = "/usr/local/cuda/lib/libcudnn_engines_precompiled.so.9";
  if (!std::filesystem::exists(path)) return imgcheck::testing::Skip("cuDNN not installed here");
  ElfInfo info = ParseFile(path);
  CHECK(info.problems.empty());
  REQUIRE_FALSE(info.fatbin.empty());
  std::map<unsigned, int> cubins;
  for (const auto& e : info.fatbin)
    if (e.kind == FatbinEntry::Kind::kCubin) ++cubins[e.sm];
  // cuDNN 9 for CUDA 13 ships SASS for Turing through Blackwell.
  for (unsigned sm : {75u, 80u, 86u, 90u, 100u, 120u}) CHECK(cubins[sm] > 0);
  for (const auto& [sm, n] : cubins) CHECK((sm >= 50 && sm < 200));
}
