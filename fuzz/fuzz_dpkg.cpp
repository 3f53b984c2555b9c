// dpkg's database as the catalog reads it: the input's NUL-separated parts are
// /var/lib/dpkg/status, info/<package>.list, and a distroless status.d record with its md5sums.
#include "catalog/metadata.h"
#include "catalog_fuzz.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = fuzz::Bytes(data, size);
  for (const catalog::DpkgPackage& p :
       catalog::ParseDpkgStatus(fuzz::SplitFiles(input, 2).front())) {
    catalog::VersionPrecision(catalog::UpstreamVersion(p.version));
  }
  fuzz::CatalogFiles(input, {"/var/lib/dpkg/status", "/var/lib/dpkg/info/libcudnn9-cuda-12.list",
                             "/var/lib/dpkg/status.d/libcudnn9-cuda-12",
                             "/var/lib/dpkg/status.d/libcudnn9-cuda-12.md5sums"});
  return 0;
}
