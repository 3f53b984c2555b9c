// An ELF file as a layer delivers it: whole (elf::Parse of a complete file), and streamed through
// elf::MakeCapturer in chunks, then parsed from what the capturer kept.
#include <memory>

#include "elf/elf.h"
#include "fuzz_input.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes = fuzz::Bytes(data, size);
  (void)elf::Parse(util::SparseFile::Whole(std::string(bytes)));

  // libarchive hands a file over in blocks of varying size; 4093 bytes cuts every table.
  std::unique_ptr<util::Capturer> capturer = elf::MakeCapturer();
  for (size_t at = 0; at < bytes.size(); at += 4093) {
    if (!capturer->Feed(bytes.substr(at, 4093))) break;
  }
  (void)elf::Parse(capturer->Finish(bytes.size()));
  return 0;
}
