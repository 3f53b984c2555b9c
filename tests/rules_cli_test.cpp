// `imgcheck rules push`, `rules update`, `rules list` and `version` through the binary: the
// rule data as an OCI artifact in a layout (the air-gapped route; registry_test.cpp pushes and
// pulls through a real registry), the cache it installs into, and the one-line refusals.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "registry_server.h"
#include "support.h"

namespace imgcheck::testing {
namespace {

namespace fs = std::filesystem;

// stderr alone of `args` (Run captures both streams): the error line.
CommandResult Stderr(const std::string& args) {
  return Run("{ " + ImgcheckCommand(args) + " 2>&1 >/dev/null; }");
}

size_t Lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// A copy of the bundled data with version.json's `date` and `schema` set.
fs::path Data(const fs::path& dir, const std::string& date, int schema = 1) {
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(SourceDir() / "rules"))
    if (e.path().extension() == ".json") fs::copy_file(e.path(), dir / e.path().filename());
  auto v = nlohmann::json::parse(ReadFile(dir / "version.json"));
  v["date"] = date;
  v["schema"] = schema;
  WriteFile(dir / "version.json", v.dump());
  return dir;
}

// A publisher's key pair, PREFIX.key and PREFIX.pub.
void Key(const fs::path& prefix) {
  REQUIRE(Run(ImgcheckCommand("key generate --output-key-prefix " + Quote(prefix))).status == 0);
}

TEST_CASE("rules data: pushed, updated from an OCI layout, listed, refused when tampered",
          "[rules][cli]") {
  TempDir tmp;
  fs::path layout = tmp / "layout", cache = tmp / "cache";
  Key(tmp / "publisher");
  std::string cache_flag =
      " --rules-cache " + Quote(cache) + " --rules-key " + Quote(tmp / "publisher.pub");

  CommandResult version = Run(ImgcheckCommand("version"));
  REQUIRE(version.status == 0);
  CHECK_THAT(version.output, Catch::Contains("\nrules data: 20"));

  // A newer copy of the bundled data, signed in the layout too (the air-gapped route).
  fs::path newer = Data(tmp / "newer", "2999-01-01");
  CommandResult push = Run(ImgcheckCommand("rules push " + Quote(newer) + " oci:" + Quote(layout) +
                                           ":1 --key " + Quote(tmp / "publisher.key")));
  INFO(push.output);
  REQUIRE(push.status == 0);
  CHECK_THAT(push.output, Catch::StartsWith("pushed rules data 2999-01-01+"));
  CHECK_THAT(push.output, Catch::Contains("signed it as oci:" + layout.string() + ":sha256-"));

  CommandResult update =
      Run(ImgcheckCommand("rules update oci:" + Quote(layout) + ":1" + cache_flag));
  INFO(update.output);
  REQUIRE(update.status == 0);
  CHECK_THAT(update.output, Catch::StartsWith("installed rules data 2999-01-01+"));
  CHECK_THAT(update.output, Catch::Contains("signed by key " + (tmp / "publisher.pub").string()));
  CommandResult list = Run(ImgcheckCommand("rules list" + cache_flag));
  REQUIRE(list.status == 0);
  CHECK_THAT(list.output, Catch::Contains("rules data 2999-01-01+") &&
                              Catch::Contains("from " + (cache / "current").string()));

  SECTION("a tampered layer: exit 2, one line, the installed data stays") {
    std::string index = ReadFile(layout / "index.json");
    auto manifest_digest =
        nlohmann::json::parse(index)["manifests"][0]["digest"].get<std::string>();
    auto manifest =
        nlohmann::json::parse(ReadFile(layout / "blobs/sha256" / manifest_digest.substr(7)));
    fs::path blob =
        layout / "blobs/sha256" / manifest["layers"][0]["digest"].get<std::string>().substr(7);
    std::string bytes = ReadFile(blob);
    bytes[bytes.size() / 2] ^= 1;
    WriteFile(blob, bytes);
    CommandResult refused = Stderr("rules update oci:" + Quote(layout) + ":1" + cache_flag);
    CHECK(refused.status == 2);
    CHECK(Lines(refused.output) == 1);
    CHECK_THAT(refused.output, Catch::Contains("does not match its digest"));
  }
  SECTION("a reference that is not rules data: exit 2, one line") {
    CommandResult refused =
        Stderr("rules update oci:" + Quote(tmp / "nothing") + ":1" + cache_flag);
    CHECK(refused.status == 2);
    CHECK(Lines(refused.output) == 1);
  }
  CommandResult after = Run(ImgcheckCommand("rules list" + cache_flag));
  CHECK_THAT(after.output, Catch::Contains("rules data 2999-01-01+"));
}

TEST_CASE("rules data: update takes only data its publisher signed, and never an older one",
          "[rules][docker-registry]") {
  if (!HaveRegistryTools()) return;
  TempDir tmp;
  Registry reg({});
  fs::path cache = tmp / "cache";
  Key(tmp / "publisher");
  Key(tmp / "other");
  const std::string ref = "docker://" + reg.host() + "/imgcheck/rules:1";
  const std::string trusted = " --rules-key " + Quote(tmp / "publisher.pub");
  const std::string cache_flag = " --rules-cache " + Quote(cache);
  fs::path newer = Data(tmp / "newer", "2999-01-01");
  auto push = [&](const fs::path& dir, const std::string& key) {
    CommandResult r = Run(ImgcheckCommand("rules push " + Quote(dir) + " " + ref +
                                          (key.empty() ? "" : " --key " + Quote(tmp / key))));
    INFO(r.output);
    REQUIRE(r.status == 0);
    return r.output;
  };
  auto update = [&](const std::string& keys) {
    CommandResult r = Stderr("rules update " + ref + cache_flag + keys);
    UNSCOPED_INFO(r.output);
    return r;
  };
  auto in_use = [&](const std::string& keys) {
    return Run(ImgcheckCommand("rules list" + cache_flag + keys)).output;
  };

  // Unsigned: refused, one line, exit 2; nothing installed.
  push(newer, "");
  CommandResult unsigned_data = update(trusted);
  CHECK(unsigned_data.status == 2);
  CHECK(Lines(unsigned_data.output) == 1);
  CHECK_THAT(unsigned_data.output,
             Catch::Contains("is not signed: no signature in cosign's layout"));
  CHECK_FALSE(fs::exists(cache / "current"));

  // Signed by a key nobody trusts.
  push(newer, "other.key");
  CommandResult other = update(trusted);
  CHECK(other.status == 2);
  CHECK(Lines(other.output) == 1);
  CHECK_THAT(other.output, Catch::Contains("is refused: not signed by a trusted key"));

  // Signed by the publisher: accepted with its key, not with the shipped keys alone (this
  // test's key is not the one imgcheck ships).
  std::string pushed = push(newer, "publisher.key");
  CHECK_THAT(update("").output, Catch::Contains("not signed by a trusted key"));
  CommandResult good = Run(ImgcheckCommand("rules update " + ref + cache_flag + trusted));
  INFO(good.output);
  REQUIRE(good.status == 0);
  CHECK_THAT(good.output, Catch::StartsWith("installed rules data 2999-01-01+") &&
                              Catch::Contains("signed by key " + (tmp / "publisher.pub").string()));
  CHECK_THAT(in_use(trusted), Catch::Contains("rules data 2999-01-01+"));
  // The independent verifier reads the signature cosign's way.
  std::string digest = pushed.substr(pushed.find("(sha256:") + 1, 71);
  CommandResult py =
      Run("python3 " + Quote(SourceDir() / "testdata/attest/verify.py") + " signature http://" +
          reg.host() + " imgcheck/rules " + digest + " " + Quote(tmp / "publisher.pub"));
  INFO(py.output);
  CHECK(py.status == 0);
  CHECK_THAT(py.output, Catch::Contains("verified: signature of " + digest));

  // An older artifact, signed by the publisher too, served again under the tag: a rollback.
  push(Data(tmp / "older", "2998-06-01"), "publisher.key");
  CommandResult replay = update(trusted);
  CHECK(replay.status == 2);
  CHECK(Lines(replay.output) == 1);
  CHECK_THAT(replay.output, Catch::Contains("is not newer than the installed data (of "
                                            "2999-01-01): refusing a rollback"));
  // The tag moved to signed data of another schema.
  push(Data(tmp / "future", "2999-02-01", 2), "publisher.key");
  CommandResult schema = update(trusted);
  CHECK(schema.status == 2);
  CHECK(Lines(schema.output) == 1);
  CHECK_THAT(schema.output, Catch::Contains("has schema 2; this imgcheck reads schema 1"));
  CHECK_THAT(in_use(trusted), Catch::Contains("rules data 2999-01-01+"));

  // Every load checks the signature again, serve's SIGHUP reload too (scan::RulesDir): without
  // the key that signed it, or once a file changed, the installed data is passed over.
  std::string untrusted = in_use("");
  CHECK_THAT(untrusted, !Catch::Contains("rules data 2999-01-01+"));
  CHECK_THAT(untrusted, Catch::Contains("its signature: not signed by a trusted key"));
  fs::path cuda = cache / "current/cuda.json";
  WriteFile(cuda, ReadFile(cuda) + "\n ");
  std::string edited = in_use(trusted);
  CHECK_THAT(edited, !Catch::Contains("rules data 2999-01-01+"));
  CHECK_THAT(edited, Catch::Contains("cuda.json is not the file that was signed"));
}

}  // namespace
}  // namespace imgcheck::testing
