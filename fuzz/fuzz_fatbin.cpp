// A CUDA fat binary (.nv_fatbin contents): the container walk over the whole input, and the
// magic scan that finds containers in captured extents.
#include <vector>

#include "elf/fatbin.h"
#include "fuzz_input.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  util::SparseFile file = util::SparseFile::Whole(std::string(fuzz::Bytes(data, size)));
  std::vector<elf::FatbinEntry> entries;
  std::vector<std::string> problems;
  elf::RangeList touched;
  elf::fatbin::Walk(file, 0, file.size(), entries, problems, &touched);
  entries.clear();
  problems.clear();
  elf::fatbin::Scan(file, entries, problems, nullptr);
  return 0;
}
