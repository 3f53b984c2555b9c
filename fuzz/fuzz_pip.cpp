// A pip distribution as the catalog reads it: the input's NUL-separated parts are the METADATA
// and RECORD of a .dist-info directory in site-packages.
#include "catalog/metadata.h"
#include "catalog_fuzz.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input = fuzz::Bytes(data, size);
  catalog::NormalizeDistName(catalog::ParseDistMetadata(fuzz::SplitFiles(input, 2).front()).name);
  const std::string dist = "/usr/local/lib/python3.10/site-packages/nvidia_cudnn_cu12-9.1.0.70";
  fuzz::CatalogFiles(input, {dist + ".dist-info/METADATA", dist + ".dist-info/RECORD"});
  return 0;
}
