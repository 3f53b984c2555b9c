// The streaming ELF capturer alone: what it keeps of large libraries and how fast Feed+Finish
// go, streaming each file from disk in 1 MiB chunks as a layer reader would.
//   build/bench/imgcheck-bench-capture [FILE...]   (default: the CUDA libraries below)
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "elf/elf.h"

namespace {

using Clock = std::chrono::steady_clock;

int Measure(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return 1;
  auto capturer = imgcheck::elf::MakeCapturer();
  std::string buffer(1 << 20, '\0');
  uint64_t size = 0;
  double fed = 0;
  bool more = true;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    auto n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    size += n;
    if (!more) continue;  // the rest of a declined file, only to learn its size
    auto start = Clock::now();
    more = capturer->Feed(std::string_view(buffer.data(), n));
    fed += std::chrono::duration<double>(Clock::now() - start).count();
  }
  auto start = Clock::now();
  imgcheck::util::SparseFile kept = capturer->Finish(size);
  fed += std::chrono::duration<double>(Clock::now() - start).count();
  auto parsed = imgcheck::elf::Parse(kept);
  size_t entries = parsed && parsed->has_value() ? (*parsed)->fatbin.size() : 0;
  std::printf("%s: kept %llu of %llu bytes (%.3f%%), Feed+Finish %.0f MB/s, %zu fatbin entries\n",
              path.c_str(), static_cast<unsigned long long>(kept.captured_bytes()),
              static_cast<unsigned long long>(size),
              100.0 * static_cast<double>(kept.captured_bytes()) / static_cast<double>(size),
              static_cast<double>(size) / 1e6 / fed, entries);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files(argv + 1, argv + argc);
  if (files.empty())
    for (const char* p : {"/usr/local/cuda/lib/libcublasLt.so.13",
                          "/usr/local/cuda/lib/libcudnn_engines_precompiled.so.9",
                          "/usr/local/cuda/lib/libnccl.so.2"})
      if (std::filesystem::exists(p)) files.emplace_back(p);
  int status = 0;
  for (const auto& f : files) status |= Measure(f);
  return status;
}
