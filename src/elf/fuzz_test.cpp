// libFuzzer-style robustness check with a fixed budget: random mutations of real and hand-written
// objects go through Parse and through the capturer; nothing may crash, hang or throw.
// (Run the elf_test binary under -fsanitize=address,undefined for the full value.)
#include <catch2/catch.hpp>
#include <random>

#include "elf/elf.h"
#include "elf_builder.h"
#include "support.h"

using namespace imgcheck;
using namespace imgcheck::elf;
using imgcheck::testing::Compile;
using imgcheck::testing::SharedObject;
using imgcheck::testing::TempDir;

namespace {

/// One mutation in the style of libFuzzer's: flip bits, write boundary values (mostly into the
/// headers, where offsets and counts live), truncate, or splice.
std::string Mutate(std::string data, std::mt19937& rng) {
  if (data.empty()) return data;
  auto pos = [&](size_t limit) {
    return static_cast<size_t>(rng() % std::min(limit, data.size()));
  };
  const int steps = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < steps; ++i) {
    switch (rng() % 6) {
      case 0: {
        int bit = static_cast<int>(rng() % 8);  // drawn first, as `a ^= b` evaluates b first
        char& byte = data[pos(data.size())];
        byte = static_cast<char>(byte ^ (1 << bit));
        break;
      }
      case 1:
        data[pos(512)] = static_cast<char>(rng());
        break;  // headers and program headers
      case 2: {
        static const uint64_t kValues[] = {
            0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff, 0xffffffff, 0x8000000000000000ull, ~0ull};
        uint64_t v = kValues[rng() % 10];
        size_t at = pos(rng() % 2 ? 512 : data.size());
        size_t n = std::min<size_t>(data.size() - at, 1u << (rng() % 4));
        for (size_t b = 0; b < n; ++b) data[at + b] = static_cast<char>(v >> (8 * b));
        break;
      }
      case 3:
        data.resize(pos(data.size()) + 1);
        break;
      case 4: {  // copy a run from elsewhere in the file (offsets that point at real tables)
        size_t from = pos(data.size()), to = pos(data.size());
        size_t n = std::min({data.size() - from, data.size() - to, size_t{1} + rng() % 64});
        data.replace(to, n, data.substr(from, n));
        break;
      }
      default:
        data[pos(data.size())] = static_cast<char>(rng());
        break;
    }
  }
  return data;
}

void Exercise(const std::string& input, std::mt19937& rng) {
  auto whole = Parse(util::SparseFile::Whole(input));
  if (whole && whole->has_value()) CHECK((*whole)->problems.size() < 100000);
  auto capturer = MakeCapturer();
  for (size_t p = 0; p < input.size();) {
    size_t n = std::min(input.size() - p, size_t{1} + rng() % 2048);
    if (!capturer->Feed(std::string_view(input).substr(p, n))) break;
    p += n;
  }
  util::SparseFile kept = capturer->Finish(input.size());
  CHECK(kept.captured_bytes() <= input.size());
  (void)Parse(kept);
}

}  // namespace

TEST_CASE("Parse and the capturer survive mutated ELF files") {
  std::vector<std::string> seeds;
  TempDir dir;
  SharedObject so;
  so.soname = "libseed.so.1";
  so.source =
      "int seed_fn(void) { return 1; }\nint old_fn(void) { return 0; }\n"
      "__asm__(\".symver old_fn,seed_fn@SEED_1\");\n";
  so.version_script =
      "SEED_1 { global: seed_fn; local: *; }; SEED_2 { global: seed_fn; } SEED_1;\n";
  so.runpath = "$ORIGIN";
  so.extra_flags = {"-Wl,--build-id", "-Wl,--hash-style=both", "-Wl,-s"};
  Compile(so, dir / "libseed.so");
  seeds.push_back(imgcheck::testing::ReadFile(dir / "libseed.so"));
  for (bool is64 : {true, false}) {
    fixture::ElfSpec spec;
    spec.is64 = is64;
    spec.big_endian = !is64;
    spec.soname = "libhand.so";
    spec.needed = {"libc.so.6"};
    spec.exported = {"a", "b"};
    spec.build_id = "xy";
    spec.fatbin =
        fixture::BuildFatbin({{false, 80, true, 1, 8, "z"}, {true, 80, false, 8, 0, "p"}});
    seeds.push_back(fixture::BuildElf(spec));
  }

  std::mt19937 rng(Catch::rngSeed());  // --rng-seed N explores other mutations
  constexpr int kIterations = 3000;    // per seed; bounded so the suite stays fast
  for (const auto& seed : seeds) {
    for (int i = 0; i < kIterations; ++i) Exercise(Mutate(seed, rng), rng);
  }
  SUCCEED("no crash in " << kIterations * seeds.size() << " mutated inputs");
}
