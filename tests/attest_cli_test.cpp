// The CI gate's verdict travelling with the image, end to end through the command line: `key
// generate`, `scan --attest` against a real docker-registry (its .att tag read back by skopeo,
// an independent client), `verify` with the right key, another key, another policy and none.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "image_writer.h"
#include "registry_server.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;

namespace {

// An image with nothing to find: one layer, one file.
std::string CleanLayout(const fs::path& dir) {
  ImageRecipe r;
  r.layers.push_back(MakeLayer({Dir("etc"), File("etc/marker", "clean")}, Compression::kGzip,
                               "COPY marker /etc/"));
  WriteOciLayout(dir, r);
  return "oci:" + dir.string() + ":latest";
}

// The tags of `repo` as skopeo lists them.
std::string Tags(const Registry& reg, const std::string& repo) {
  CommandResult r = Run("skopeo list-tags --tls-verify=false docker://" + reg.host() + "/" + repo);
  INFO(r.output);
  REQUIRE(r.status == 0);
  return r.output;
}

}  // namespace

TEST_CASE("attest: scan --attest signs the verdict into the registry, verify reads it back",
          "[attest][docker-registry]") {
  if (!HaveRegistryTools()) return;
  TempDir work;
  Registry reg({});
  reg.Push("oci:" + (BinaryDir() / "demo/image").string() + ":latest", "team/cuda:1");
  reg.Push(CleanLayout(work / "clean"), "team/clean:1");
  std::string bad = "docker://" + reg.host() + "/team/cuda:1";
  std::string good = "docker://" + reg.host() + "/team/clean:1";

  CommandResult gen =
      Run(ImgcheckCommand("key generate --output-key-prefix " + Quote(work / "ci")));
  INFO(gen.output);
  REQUIRE(gen.status == 0);
  const fs::perms owner_rw = fs::perms::owner_read | fs::perms::owner_write;
  CHECK((fs::status(work / "ci.key").permissions() & fs::perms::all) == owner_rw);
  REQUIRE(
      Run(ImgcheckCommand("key generate --output-key-prefix " + Quote(work / "other"))).status ==
      0);
  // Never replaced: a second generate with the same prefix is refused.
  CommandResult again =
      Run(ImgcheckCommand("key generate --output-key-prefix " + Quote(work / "ci")));
  CHECK(again.status == 2);
  CHECK_THAT(again.output, Catch::Contains("exists; not replacing it"));

  // The gate: the broken image fails (exit 1) and is attested all the same, as failing.
  CommandResult scan = Run(ImgcheckCommand("scan " + bad + " --attest --key " +
                                           Quote(work / "ci.key") + " --format json"));
  INFO(scan.output);
  CHECK(scan.status == 1);
  CHECK_THAT(scan.output,
             Catch::Contains("imgcheck: attested " + reg.host() + "/team/cuda@sha256:"));
  CHECK_THAT(Tags(reg, "team/cuda"),
             Catch::Matches("(?:.|\\n)*\"sha256-[0-9a-f]{64}\\.att\"(?:.|\\n)*"));
  CommandResult clean =
      Run(ImgcheckCommand("scan " + good + " --attest --key " + Quote(work / "ci.key")));
  INFO(clean.output);
  CHECK(clean.status == 0);

  // verify: the attested verdict, without a scan: exit 1 for the failing image, 0 for the clean.
  CommandResult v_bad = Run(ImgcheckCommand("verify " + bad + " --key " + Quote(work / "ci.pub")));
  INFO(v_bad.output);
  CHECK(v_bad.status == 1);
  CHECK_THAT(v_bad.output, Catch::Contains(": FAIL (attested, signed by "));
  CommandResult v_good = Run(
      ImgcheckCommand("verify " + good + " --key " + Quote(work / "ci.pub") + " --format json"));
  INFO(v_good.output);
  CHECK(v_good.status == 0);
  CHECK_THAT(v_good.output, Catch::Contains("\"verdict\": \"pass\""));

  // Another key: refused with its reason, exit 2 (no attestation verifies).
  CommandResult other =
      Run(ImgcheckCommand("verify " + good + " --key " + Quote(work / "other.pub")));
  INFO(other.output);
  CHECK(other.status == 2);
  CHECK_THAT(other.output, Catch::Contains("no valid attestation of " + good));
  // Another policy (a rules config that sets --fail-on differently is another identity): the
  // attestation was made under the default one, so it does not decide.
  WriteFile(work / "imgcheck.yaml", "fail-on: warning\n");
  CommandResult policy = Run(ImgcheckCommand("verify " + good + " --key " + Quote(work / "ci.pub") +
                                             " --policy-from " + Quote(work / "imgcheck.yaml")));
  INFO(policy.output);
  CHECK(policy.status == 2);
  CHECK(Run(ImgcheckCommand("verify " + good + " --key " + Quote(work / "ci.pub") +
                            " --policy-from " + Quote(work / "imgcheck.yaml") + " --any-policy"))
            .status == 0);
  // An image nobody attested.
  reg.Push(CleanLayout(work / "clean2"), "team/unattested:1");
  CommandResult none = Run(ImgcheckCommand("verify docker://" + reg.host() +
                                           "/team/unattested:1 --key " + Quote(work / "ci.pub")));
  CHECK(none.status == 2);
  CHECK_THAT(none.output, Catch::Contains("none is attached"));
  // --attest without --key: one line, exit 2, before any scan.
  CommandResult nokey = Run(ImgcheckCommand("scan " + good + " --attest"));
  CHECK(nokey.status == 2);
  CHECK_THAT(nokey.output, Catch::Contains("--attest needs --key FILE"));
}
