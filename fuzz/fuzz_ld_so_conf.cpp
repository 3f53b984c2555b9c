// /etc/ld.so.conf and the files it may include, read from a merged tree as the catalog does: the
// input's NUL-separated parts are /etc/ld.so.conf, then /etc/ld.so.conf.d/1.conf, 2.conf, ...
#include <string>

#include "catalog/ld_so.h"
#include "fake_image.h"
#include "fuzz_input.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string_view> files = fuzz::SplitFiles(fuzz::Bytes(data, size), 8);
  image::Tree tree;
  testing::AddFile(tree, "/etc/ld.so.conf", std::string(files[0]));
  for (size_t i = 1; i < files.size(); ++i) {
    testing::AddFile(tree, "/etc/ld.so.conf.d/" + std::to_string(i) + ".conf",
                     std::string(files[i]), static_cast<int>(i));
  }
  testing::AddLink(tree, "/etc/ld.so.conf.d/loop.conf", "../ld.so.conf");
  try {
    catalog::ReadLdSoConf(tree);
  } catch (const util::Fatal&) {  // include depth or files past their limits
  }
  return 0;
}
