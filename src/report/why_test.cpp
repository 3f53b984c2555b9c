// `imgcheck why` text from hand-made resolutions: every line libtree-style, byte for byte.
#include "report/why.h"

#include <catch2/catch.hpp>

namespace imgcheck::report {
namespace {

using loader::Attempt;
using loader::Outcome;
using loader::Reason;
using loader::Resolution;

image::Tree TreeWithLayers(const std::vector<std::pair<std::string, int>>& files) {
  image::Tree tree;
  for (const auto& [path, layer] : files) {
    image::Node& n = tree.mutable_nodes()[path];
    n.type = image::NodeType::kRegular;
    n.layer = layer;
  }
  return tree;
}

TEST_CASE("why: a hit through an RPATH, a miss with every candidate tried", "[report][why]") {
  image::Tree tree = TreeWithLayers({{"/app/a.so", 2}, {"/nv/libcudnn.so.9.1.0", 3}});
  Resolution hit;
  hit.consumer = "/app/a.so";
  hit.name = "libcudnn.so.9";
  hit.status = loader::Status::kFound;
  hit.reason = Reason::kRpath;
  hit.path = "/app/../nv/libcudnn.so.9";
  hit.real_path = "/nv/libcudnn.so.9.1.0";
  hit.entry = "$ORIGIN/../nv";
  hit.rpath_owner = "/app/a.so";
  hit.tried = {{Reason::kRpath, "/x86", "/x86/libcudnn.so.9", Outcome::kWrongClass},
               {Reason::kRpath, "$ORIGIN/../nv", hit.path, Outcome::kFound}};
  Resolution miss;
  miss.consumer = "/app/b.so";
  miss.name = "libcudnn.so.9";
  miss.kind = loader::Kind::kDlopen;
  miss.tried = {{Reason::kRunpath, "/none", "/none/libcudnn.so.9", Outcome::kMissing},
                {Reason::kLdCache, "/etc/ld.so.cache", "", Outcome::kMissing},
                {Reason::kDefaultDir, "/lib64", "/lib64/libcudnn.so.9", Outcome::kMissing}};
  std::vector<loader::WhyEntry> entries = {
      {hit, {{"/app/a.so", "framework x"}, {"/app/a.so", "again"}}}, {miss, {{"/app/b.so", ""}}}};
  CHECK(RenderWhy(tree, "libcudnn.so.9", entries) ==
        "libcudnn.so.9\n"
        "  DT_NEEDED of /app/a.so (layer 2)\n"
        "  skipped /x86/libcudnn.so.9: wrong-class (rpath)\n"
        "  => /app/../nv/libcudnn.so.9  [rpath: DT_RPATH of /app/a.so: \"$ORIGIN/../nv\"]\n"
        "     real file /nv/libcudnn.so.9.1.0\n"
        "     file from layer 3\n"
        "  in the link map of /app/a.so (framework x),\n"
        "                     /app/a.so (again)\n"
        "libcudnn.so.9\n"
        "  dlopen by /app/b.so\n"
        "  => not found; tried, in order:\n"
        "     runpath  /none/libcudnn.so.9  from \"/none\"  missing\n"
        "     ld.so.cache  (no entry for libcudnn.so.9)  missing\n"
        "     default-dir  /lib64/libcudnn.so.9  missing\n"
        "  in the link map of /app/b.so\n");
}

TEST_CASE("why: a name no link map requests", "[report][why]") {
  CHECK(RenderWhy(image::Tree(), "libnone.so", {}) ==
        "libnone.so: no object in the image's link maps requests it\n");
}

}  // namespace
}  // namespace imgcheck::report
