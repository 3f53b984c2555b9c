// A Dockerfile (--dockerfile) parsed, then mapped onto a history that BuildKit would have
// written for it, and each layer located back to its instruction.
#include "fuzz_input.h"
#include "image/dockerfile.h"

using namespace imgcheck;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  util::Expected<image::Dockerfile> parsed = image::ParseDockerfile(fuzz::Bytes(data, size));
  if (!parsed) return 0;
  // A base image layer, then one history entry per instruction of the final stage.
  std::vector<image::HistoryEntry> history = {{"/bin/sh -c #(nop) ADD file:base in /", false}};
  size_t layers = 1;
  if (!parsed->stages.empty()) {
    const std::vector<image::Instruction>& final_stage = parsed->stages.back().instructions;
    for (size_t i = 1; i < final_stage.size(); ++i) {  // [0] is the FROM, which leaves none
      const image::Instruction& in = final_stage[i];
      bool empty =
          image::HistoryKeyword(in.text) != "RUN" && in.keyword != "COPY" && in.keyword != "ADD";
      history.push_back({in.text, empty});
      if (!empty) ++layers;
    }
  }
  image::BuildMap map = image::MapBuild(*parsed, history, layers);
  for (size_t layer = 0; layer < layers; ++layer) {
    image::Locate(map, static_cast<int>(layer), "/usr/lib/x86_64-linux-gnu/libcudnn.so.9",
                  "LD_LIBRARY_PATH");
  }
  return 0;
}
