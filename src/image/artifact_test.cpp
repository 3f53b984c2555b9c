// OCI artifacts (one config, one layer) through an OCI layout: packing, pushing, pulling, and
// the refusals of a tampered, truncated or foreign artifact. registry_test.cpp pushes and pulls
// them through a real registry.
#include "image/artifact.h"

#include <archive.h>
#include <archive_entry.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support.h"
#include "util/error.h"
#include "util/sha256.h"

namespace imgcheck::image {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

constexpr ArtifactTypes kTypes{"application/vnd.example.test.v1",
                               "application/vnd.example.test.config.v1+json",
                               "application/vnd.example.test.layer.v1.tar+gzip"};

// A tar with one entry of `type` named `name` (a hostile layer).
std::string TarWith(const std::string& name, unsigned type) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  auto write_cb = [](archive*, void* data, const void* buf, size_t n) -> la_ssize_t {
    static_cast<std::string*>(data)->append(static_cast<const char*>(buf), n);
    return static_cast<la_ssize_t>(n);
  };
  REQUIRE(archive_write_open(a, &out, nullptr, write_cb, nullptr) == ARCHIVE_OK);
  archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, name.c_str());
  archive_entry_set_filetype(e, type);
  archive_entry_set_perm(e, 0644);
  if (type == AE_IFLNK) archive_entry_set_symlink(e, "/etc/passwd");
  archive_entry_set_size(e, 0);
  archive_write_header(a, e);
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

TEST_CASE("artifact layers: the same files make the same bytes, and only files come back",
          "[artifact]") {
  std::map<std::string, std::string> files = {{"b.json", "{\"b\": 2}"}, {"a.json", "{}"}};
  std::string layer = PackFiles(files);
  CHECK(layer == PackFiles(files));
  CHECK(layer.substr(0, 2) == "\x1f\x8b");  // gzip
  CHECK(UnpackFiles(layer, 10, 1 << 20) == files);

  CHECK_THROWS_WITH(UnpackFiles(layer, 1, 1 << 20), Catch::Contains("more than 1 files"));
  CHECK_THROWS_WITH(UnpackFiles(layer, 10, 4), Catch::Contains("larger than 4"));
  CHECK_THROWS_WITH(UnpackFiles(layer.substr(0, layer.size() / 2), 10, 1 << 20),
                    Catch::StartsWith("the rules layer is corrupt"));
  CHECK_THROWS_WITH(UnpackFiles(TarWith("evil.json", AE_IFLNK), 10, 1 << 20),
                    Catch::Contains("'evil.json', not a file"));
  CHECK_THROWS_WITH(UnpackFiles(TarWith("../up.json", AE_IFREG), 10, 1 << 20),
                    Catch::Contains("'../up.json', not a file"));
  CHECK_THROWS_WITH(UnpackFiles(TarWith("sub", AE_IFDIR), 10, 1 << 20),
                    Catch::Contains("'sub/', not a file"));
}

TEST_CASE("artifacts in an OCI layout: pushed, pulled, and refused when tampered or truncated",
          "[artifact]") {
  TempDir dir;
  fs::path layout = dir.path() / "layout";
  std::string config = R"({"schema":1})";
  std::string layer = PackFiles({{"x.json", "{\"x\": 1}"}});
  std::string ref = "oci:" + layout.string() + ":1";
  std::string digest = PushArtifact(ref, kTypes, config, layer);
  CHECK(PushArtifact(ref, kTypes, config, layer) == digest);  // deterministic manifest
  PushArtifact("oci:" + layout.string() + ":other", kTypes, "{}", layer);

  Artifact a = PullArtifact(ref, kTypes, 1 << 20);
  CHECK(a.manifest_digest == digest);
  CHECK(a.config == config);
  CHECK(a.layer == layer);
  auto manifest = nlohmann::json::parse(ReadFile(layout / "blobs/sha256" / digest.substr(7)));
  CHECK(manifest["artifactType"] == kTypes.artifact);
  CHECK(manifest["config"]["mediaType"] == kTypes.config);
  CHECK(manifest["layers"].size() == 1);
  CHECK(nlohmann::json::parse(ReadFile(layout / "index.json"))["manifests"].size() == 2);

  SECTION("another kind of artifact") {
    ArtifactTypes other = kTypes;
    other.config = "application/vnd.oci.image.config.v1+json";
    CHECK_THROWS_WITH(PullArtifact(ref, other, 1 << 20),
                      Catch::Contains("is not a application/vnd.example.test.v1 artifact"));
  }
  SECTION("a layer larger than allowed") {
    CHECK_THROWS_WITH(PullArtifact(ref, kTypes, 16), Catch::Contains("more than the 16 allowed"));
  }
  fs::path blob = layout / "blobs/sha256" / util::Sha256Digest(layer).substr(7);
  SECTION("a tampered layer") {
    std::string bytes = layer;
    bytes[bytes.size() / 2] ^= 0x20;
    WriteFile(blob, bytes);
    CHECK_THROWS_WITH(PullArtifact(ref, kTypes, 1 << 20),
                      Catch::StartsWith("layer " + util::Sha256Digest(layer)) &&
                          Catch::Contains("does not match its digest"));
  }
  SECTION("a truncated layer") {
    WriteFile(blob, layer.substr(0, layer.size() - 10));
    CHECK_THROWS_WITH(PullArtifact(ref, kTypes, 1 << 20), !Catch::Contains("\n"));
  }
}

}  // namespace
}  // namespace imgcheck::image
