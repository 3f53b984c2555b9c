// Catch2's session, and the exit status ctest reads as "skipped" (Catch2 v2 has no SKIP).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <iostream>

#include "support.h"

namespace imgcheck::testing {
namespace {
bool skipped = false;
}  // namespace

void Skip(const std::string& why) {
  std::cout << "SKIPPED: " << why << std::endl;
  skipped = true;
}

}  // namespace imgcheck::testing

int main(int argc, char* argv[]) {
  int failed = Catch::Session().run(argc, argv);
  if (failed != 0) return 1;  // a failure is never hidden by a skip
  return imgcheck::testing::skipped ? imgcheck::testing::kSkipExitCode : 0;
}
