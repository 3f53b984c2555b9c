// /etc/ld.so.cache in any of glibc's formats (old, new, old followed by new), then the loader's
// lookup of each name it holds.
#include "catalog/ld_so.h"
#include "fuzz_input.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    util::Expected<catalog::LdCacheFile> cache = catalog::ParseLdCache(fuzz::Bytes(data, size));
    if (!cache) return 0;
    const std::vector<std::string> hwcaps = {"x86-64-v4", "x86-64-v3", "x86-64-v2"};
    for (const catalog::LdCacheRecord& r : cache->entries)
      cache->Lookup(r.name, catalog::CacheFlagsFor(62, true), hwcaps);
  } catch (const util::Fatal&) {  // entries past their limit
  }
  return 0;
}
