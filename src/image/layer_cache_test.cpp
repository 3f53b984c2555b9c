#include "image/layer_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <thread>

#include "image/image.h"
#include "image_writer.h"
#include "support.h"
#include "util/path.h"
#include "util/sha256.h"

namespace imgcheck::image {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const std::string kDigest = "sha256:" + std::string(64, 'a');
const std::string kDiffId = "sha256:" + std::string(64, 'b');

LayerEntry MakeEntry(std::string path, EntryKind kind, uint32_t mode = 0644, uint64_t size = 0,
                     std::string link = "") {
  LayerEntry e;
  e.path = std::move(path);
  e.kind = kind;
  e.mode = mode;
  e.size = size;
  e.link_target = std::move(link);
  return e;
}

// A reading with every kind of entry, captured extents, and diagnostics of this and no layer.
LayerContents Sample() {
  LayerContents c;
  c.digest = kDigest;
  c.diff_id = kDiffId;
  c.compressed_size = 12345;
  c.size = 67890;
  c.entries.push_back(MakeEntry("/usr", EntryKind::kDirectory, 0755));
  LayerEntry so = MakeEntry("/usr/lib/libcudnn.so.9", EntryKind::kFile, 0755, 1 << 20);
  util::SparseFile sparse(1 << 20);
  sparse.Add(0, std::string("\x7f"
                            "ELF\x02\x01\x01",
                            7));
  sparse.Add(4096, std::string(300, 'x'));
  sparse.Add((1 << 20) - 10, std::string(10, '\0'));
  sparse.set_md5("0123456789abcdef0123456789abcdef");
  sparse.set_sha256(std::string(64, 'e'));
  so.content = std::make_shared<const util::SparseFile>(sparse);
  so.digest_wanted = true;
  c.entries.push_back(so);
  LayerEntry wanted_uncaptured = MakeEntry("/usr/lib/libtiny.so", EntryKind::kFile, 0644, 10);
  wanted_uncaptured.digest_wanted = true;  // wanted, but the policy kept nothing
  c.entries.push_back(wanted_uncaptured);
  LayerEntry meta = MakeEntry("/etc/os-release", EntryKind::kFile, 0644, 5);
  meta.content = std::make_shared<const util::SparseFile>(util::SparseFile::Whole("ID=x\n"));
  c.entries.push_back(meta);
  LayerEntry empty_capture = MakeEntry("/empty", EntryKind::kFile, 0600, 0);
  empty_capture.content = std::make_shared<const util::SparseFile>(util::SparseFile(0));
  c.entries.push_back(empty_capture);
  c.entries.push_back(
      MakeEntry("/usr/lib/libcudnn.so", EntryKind::kSymlink, 0777, 0, "libcudnn.so.9"));
  c.entries.push_back(
      MakeEntry("/usr/lib/hard", EntryKind::kHardlink, 0755, 0, "/usr/lib/libcudnn.so.9"));
  c.entries.push_back(MakeEntry("/dev/null", EntryKind::kCharDevice, 0666));
  c.entries.push_back(MakeEntry("/dev/sda", EntryKind::kBlockDevice, 0660));
  c.entries.push_back(MakeEntry("/run/fifo", EntryKind::kFifo, 0600));
  c.entries.push_back(MakeEntry("/old", EntryKind::kWhiteout));
  c.entries.push_back(MakeEntry("/opt", EntryKind::kOpaque));
  c.entries.push_back(MakeEntry("/caf\xc3\xa9 with\nnewline", EntryKind::kFile, 04755, 7));
  c.diagnostics.push_back({"/x", 3, "tar entry '../x' climbs above the root; read as /x"});
  c.diagnostics.push_back({"", -1, "an image-level note"});
  return c;
}

void RequireSameContent(const std::shared_ptr<const util::SparseFile>& a,
                        const std::shared_ptr<const util::SparseFile>& b) {
  REQUIRE((a == nullptr) == (b == nullptr));
  if (!a) return;
  REQUIRE(a->size() == b->size());
  CHECK(a->md5() == b->md5());
  CHECK(a->sha256() == b->sha256());
  REQUIRE(a->extents().size() == b->extents().size());
  for (size_t i = 0; i < a->extents().size(); ++i) {
    CHECK(a->extents()[i].offset == b->extents()[i].offset);
    CHECK(a->extents()[i].bytes == b->extents()[i].bytes);
  }
}

void RequireSame(const LayerContents& a, const LayerContents& b) {
  CHECK(a.digest == b.digest);
  CHECK(a.diff_id == b.diff_id);
  CHECK(a.compressed_size == b.compressed_size);
  CHECK(a.size == b.size);
  REQUIRE(a.entries.size() == b.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    INFO(a.entries[i].path);
    CHECK(a.entries[i].path == b.entries[i].path);
    CHECK(a.entries[i].kind == b.entries[i].kind);
    CHECK(a.entries[i].mode == b.entries[i].mode);
    CHECK(a.entries[i].size == b.entries[i].size);
    CHECK(a.entries[i].link_target == b.entries[i].link_target);
    CHECK(a.entries[i].digest_wanted == b.entries[i].digest_wanted);
    RequireSameContent(a.entries[i].content, b.entries[i].content);
  }
  REQUIRE(a.diagnostics.size() == b.diagnostics.size());
  for (size_t i = 0; i < a.diagnostics.size(); ++i) {
    CHECK(a.diagnostics[i].path == b.diagnostics[i].path);
    CHECK(a.diagnostics[i].layer == b.diagnostics[i].layer);
    CHECK(a.diagnostics[i].message == b.diagnostics[i].message);
  }
}

LayerKey Key(std::string capture_id = "policy-1") {
  return {kDigest, kDiffId, std::move(capture_id)};
}

TEST_CASE("a layer reading survives the entry encoding", "[layer_cache]") {
  LayerContents c = Sample();
  std::optional<LayerContents> back = ParseLayer(SerializeLayer(c, 3), 3);
  REQUIRE(back);
  RequireSame(c, *back);

  SECTION("diagnostics of the layer take the index it has in the image that reads it") {
    std::optional<LayerContents> moved = ParseLayer(SerializeLayer(c, 3), 7);
    REQUIRE(moved);
    CHECK(moved->diagnostics[0].layer == 7);
    CHECK(moved->diagnostics[1].layer == -1);
  }
  SECTION("an empty reading") {
    LayerContents empty;
    std::optional<LayerContents> e = ParseLayer(SerializeLayer(empty, 0), 0);
    REQUIRE(e);
    RequireSame(empty, *e);
  }
}

TEST_CASE("a damaged entry is refused, whatever the damage", "[layer_cache]") {
  const std::string good = SerializeLayer(Sample(), 0);
  REQUIRE(ParseLayer(good, 0));
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    INFO("byte " << i << " flipped");
    CHECK_FALSE(ParseLayer(bad, 0));
  }
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n);
    CHECK_FALSE(ParseLayer(std::string_view(good).substr(0, n), 0));
  }
  CHECK_FALSE(ParseLayer(good + "x", 0));
}

TEST_CASE("keys name everything a reading depends on", "[layer_cache]") {
  LayerKey k = Key();
  CHECK(k.Hex().size() == 64);
  CHECK(k.Hex() == Key().Hex());
  CHECK(k.Hex() != Key("policy-2").Hex());
  CHECK(k.Hex() != LayerKey{kDigest, "sha256:" + std::string(64, 'c'), "policy-1"}.Hex());
  CHECK(k.Hex() != LayerKey{"sha256:" + std::string(64, 'c'), kDiffId, "policy-1"}.Hex());
  // Fields cannot run into each other.
  CHECK(LayerKey{"ab", "c", ""}.Hex() != LayerKey{"a", "bc", ""}.Hex());
}

TEST_CASE("the cache stores, finds, and discards what it cannot trust", "[layer_cache]") {
  TempDir tmp;
  LayerCache cache(tmp.path());
  REQUIRE(cache.enabled());
  CHECK_FALSE(cache.Lookup(Key(), 0));
  cache.Store(Key(), Sample(), 0);
  fs::path entry = cache.EntryPath(Key());
  REQUIRE(fs::exists(entry));
  CHECK((fs::status(tmp.path()).permissions() & (fs::perms::group_all | fs::perms::others_all)) ==
        fs::perms::none);

  std::optional<LayerContents> hit = cache.Lookup(Key(), 0);
  REQUIRE(hit);
  RequireSame(Sample(), *hit);
  CHECK_FALSE(cache.Lookup(Key("another policy"), 0));

  SECTION("a flipped byte: discarded, deleted, then rebuilt by a store") {
    std::string bytes = testing::ReadFile(entry);
    bytes[bytes.size() / 2] ^= 1;
    testing::WriteFile(entry, bytes);
    CHECK_FALSE(cache.Lookup(Key(), 0));
    CHECK_FALSE(fs::exists(entry));
    cache.Store(Key(), Sample(), 0);
    CHECK(cache.Lookup(Key(), 0));
  }
  SECTION("a truncated entry") {
    fs::resize_file(entry, fs::file_size(entry) - 1);
    CHECK_FALSE(cache.Lookup(Key(), 0));
    CHECK_FALSE(fs::exists(entry));
  }
  SECTION("a valid entry under another key's name") {
    LayerKey other{"sha256:" + std::string(64, 'c'), kDiffId, "policy-1"};
    fs::copy_file(entry, cache.EntryPath(other));
    CHECK_FALSE(cache.Lookup(other, 0));
  }
  SECTION("an entry that is a FIFO or a link: a miss, never a hang or a read elsewhere") {
    fs::remove(entry);
    REQUIRE(mkfifo(entry.c_str(), 0600) == 0);
    CHECK_FALSE(cache.Lookup(Key(), 0));
    CHECK_FALSE(fs::exists(fs::symlink_status(entry)));
    testing::WriteFile(tmp / "elsewhere", "not an entry");
    fs::create_symlink(tmp / "elsewhere", entry);
    CHECK_FALSE(cache.Lookup(Key(), 0));
    CHECK_FALSE(fs::exists(fs::symlink_status(entry)));
    CHECK(fs::exists(tmp / "elsewhere"));
  }
  SECTION("a reading whose digests are not the key's is not stored") {
    LayerKey other{"sha256:" + std::string(64, 'c'), kDiffId, "policy-1"};
    cache.Store(other, Sample(), 0);
    CHECK_FALSE(fs::exists(cache.EntryPath(other)));
  }
}

TEST_CASE("a cache directory that cannot be created disables the cache", "[layer_cache]") {
  TempDir tmp;
  testing::WriteFile(tmp / "file", "x");
  LayerCache cache(tmp / "file");
  CHECK_FALSE(cache.enabled());
  cache.Store(Key(), Sample(), 0);
  CHECK_FALSE(cache.Lookup(Key(), 0));
  CHECK(cache.Prune() == 0);
}

TEST_CASE("DefaultCacheDir follows XDG_CACHE_HOME, then HOME", "[layer_cache]") {
  std::string old_xdg = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
  std::string old_home = std::getenv("HOME") ? std::getenv("HOME") : "";
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  CHECK(DefaultCacheDir() == "/x/cache/imgcheck");
  setenv("XDG_CACHE_HOME", "relative", 1);  // ignored, as the XDG spec says
  setenv("HOME", "/home/u", 1);
  CHECK(DefaultCacheDir() == "/home/u/.cache/imgcheck");
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HOME");
  CHECK(DefaultCacheDir().empty());
  if (!old_xdg.empty()) setenv("XDG_CACHE_HOME", old_xdg.c_str(), 1);
  if (!old_home.empty()) setenv("HOME", old_home.c_str(), 1);
}

TEST_CASE("concurrent processes and threads storing one key leave a whole entry", "[layer_cache]") {
  TempDir tmp;
  LayerCache cache(tmp.path());
  LayerContents c = Sample();
  // Bigger entries make torn writes likelier to show.
  c.entries[1].content =
      std::make_shared<const util::SparseFile>(util::SparseFile::Whole(std::string(1 << 20, 'z')));
  c.entries[1].size = 1 << 20;
  constexpr int kRounds = 20;
  std::vector<pid_t> children;
  for (int p = 0; p < 2; ++p) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      for (int i = 0; i < kRounds; ++i) cache.Store(Key(), c, 0);
      _exit(0);
    }
    children.push_back(pid);
  }
  std::thread writer([&] {
    for (int i = 0; i < kRounds; ++i) cache.Store(Key(), c, 0);
  });
  int hits = 0;
  for (int i = 0; i < 4 * kRounds; ++i) {
    // Every lookup finds nothing yet or the whole entry, never a torn one (which it would delete).
    if (std::optional<LayerContents> got = cache.Lookup(Key(), 0)) {
      ++hits;
      REQUIRE(got->entries[1].content->extents()[0].bytes.size() == size_t{1} << 20);
    }
  }
  writer.join();
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::optional<LayerContents> final_entry = cache.Lookup(Key(), 0);
  REQUIRE(final_entry);
  RequireSame(c, *final_entry);
  int files = 0;
  for (const auto& e : fs::directory_iterator(cache.dir())) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);  // no temporary file left behind
  INFO("hits while writing: " << hits);
}

void SetAge(const fs::path& p, int seconds_ago) {
  struct timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  REQUIRE(utimensat(AT_FDCWD, p.c_str(), times, 0) == 0);
}

TEST_CASE("pruning keeps the most recently used entries within the bound", "[layer_cache]") {
  TempDir tmp;
  uint64_t entry_size = SerializeLayer(Sample(), 0).size();
  LayerCache cache(tmp.path(), 3 * entry_size);
  std::vector<LayerKey> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(Key("policy " + std::to_string(i)));
    cache.Store(keys.back(), Sample(), 0);
    SetAge(cache.EntryPath(keys.back()), 1000 - i * 100);  // key 0 is the oldest
  }
  testing::WriteFile(cache.dir() / ".tmp-abandoned", "half an entry");
  SetAge(cache.dir() / ".tmp-abandoned", 2 * 3600);
  testing::WriteFile(cache.dir() / ".tmp-in-progress", "being written");
  testing::WriteFile(cache.dir() / "README", "not an entry: never counted, never deleted");

  REQUIRE(cache.Lookup(keys[0], 0));  // a hit makes the oldest the newest
  uint64_t freed = cache.Prune();
  CHECK(freed == 2 * entry_size + std::string("half an entry").size());
  CHECK(fs::exists(cache.EntryPath(keys[0])));
  CHECK_FALSE(fs::exists(cache.EntryPath(keys[1])));
  CHECK_FALSE(fs::exists(cache.EntryPath(keys[2])));
  CHECK(fs::exists(cache.EntryPath(keys[3])));
  CHECK(fs::exists(cache.EntryPath(keys[4])));
  CHECK_FALSE(fs::exists(cache.dir() / ".tmp-abandoned"));
  CHECK(fs::exists(cache.dir() / ".tmp-in-progress"));
  CHECK(fs::exists(cache.dir() / "README"));
  CHECK(cache.Prune() == 0);
}

// ---- end to end, through image::Load ----

void RequireSameTree(const Tree& a, const Tree& b) {
  REQUIRE(a.nodes().size() == b.nodes().size());
  for (auto ia = a.nodes().begin(), ib = b.nodes().begin(); ia != a.nodes().end(); ++ia, ++ib) {
    INFO(ia->first);
    REQUIRE(ia->first == ib->first);
    const Node& x = ia->second;
    const Node& y = ib->second;
    CHECK(x.type == y.type);
    CHECK(x.mode == y.mode);
    CHECK(x.size == y.size);
    CHECK(x.link_target == y.link_target);
    CHECK(x.layer == y.layer);
    CHECK(x.history == y.history);
    RequireSameContent(x.content, y.content);
  }
  REQUIRE(a.deleted().size() == b.deleted().size());
  for (auto ia = a.deleted().begin(), ib = b.deleted().begin(); ia != a.deleted().end();
       ++ia, ++ib) {
    INFO(ia->first);
    REQUIRE(ia->first == ib->first);
    CHECK(ia->second.layer == ib->second.layer);
    CHECK(ia->second.history == ib->second.history);
    CHECK(ia->second.type == ib->second.type);
  }
}

void RequireSameImage(const Image& a, const Image& b) {
  RequireSameTree(a.tree, b.tree);
  REQUIRE(a.layers.size() == b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    CHECK(a.layers[i].digest == b.layers[i].digest);
    CHECK(a.layers[i].diff_id == b.layers[i].diff_id);
    CHECK(a.layers[i].compressed_size == b.layers[i].compressed_size);
    CHECK(a.layers[i].size == b.layers[i].size);
    CHECK(a.layers[i].added == b.layers[i].added);
    CHECK(a.layers[i].changed == b.layers[i].changed);
    CHECK(a.layers[i].deleted == b.layers[i].deleted);
  }
  REQUIRE(a.diagnostics.size() == b.diagnostics.size());
  for (size_t i = 0; i < a.diagnostics.size(); ++i) {
    CHECK(a.diagnostics[i].path == b.diagnostics[i].path);
    CHECK(a.diagnostics[i].layer == b.diagnostics[i].layer);
    CHECK(a.diagnostics[i].message == b.diagnostics[i].message);
  }
}

testing::ImageRecipe BaseRecipe() {
  using namespace testing;
  ImageRecipe r;
  r.layers.push_back(testing::MakeLayer(
      {Dir("usr"), Dir("usr/lib"), File("usr/lib/libcudnn.so.9", std::string(5000, 'c'), 0755),
       Symlink("usr/lib/libcudnn.so", "libcudnn.so.9"), File("etc/os-release", "ID=debian\n"),
       File("../escape", "climbs")},
      Compression::kGzip, "base"));
  r.layers.push_back(testing::MakeLayer(
      {File("usr/lib/libcublas.so.13", std::string(3000, 'b')),
       Hardlink("usr/lib/libcublas.so", "usr/lib/libcublas.so.13"), Whiteout("etc/os-release")},
      Compression::kZstd, "cublas"));
  return r;
}

// Captures the first bytes of every regular file: enough to tell cached content from none.
LoadOptions Options(const fs::path& cache_dir, bool use_cache, int jobs) {
  LoadOptions o;
  o.capture = [](std::string_view, uint64_t, uint32_t) { return CapturePrefix(64); };
  o.capture_id = "prefix-64";
  o.use_cache = use_cache;
  o.cache_dir = cache_dir.string();
  o.jobs = jobs;
  return o;
}

void Damage(const fs::path& blob) {
  std::string b = testing::ReadFile(blob);
  for (size_t i = 10; i < b.size(); i += 7) b[i] = static_cast<char>(~b[i]);
  testing::WriteFile(blob, b);
}

TEST_CASE("a cached Load gives the image an uncached one gives, without reading its layers",
          "[layer_cache][load]") {
  TempDir tmp;
  testing::ImageRecipe r = BaseRecipe();
  testing::WrittenImage written = testing::WriteOciLayout(tmp / "layout", r);
  std::string ref = "oci:" + (tmp / "layout").string() + ":latest";

  Image plain = Load(ref, Options(tmp / "cache", false, 1));
  REQUIRE(plain.tree.Find("/usr/lib/libcudnn.so.9"));
  REQUIRE(plain.tree.Find("/usr/lib/libcudnn.so.9")->content);
  CHECK_FALSE(fs::exists(tmp / "cache"));  // use_cache off: nothing written

  Image cold = Load(ref, Options(tmp / "cache", true, 2));
  RequireSameImage(plain, cold);
  LayerCache cache(tmp / "cache");
  for (const testing::WrittenLayer& l : written.layers)
    CHECK(fs::exists(cache.EntryPath({l.digest, l.diff_id, "prefix-64"})));

  // Every layer blob is now garbage: a warm Load that read any of them would fail.
  for (const testing::WrittenLayer& l : written.layers)
    Damage(tmp / "layout" / "blobs" / "sha256" / l.digest.substr(7));
  Image warm = Load(ref, Options(tmp / "cache", true, 1));
  RequireSameImage(plain, warm);
  Image warm_parallel = Load(ref, Options(tmp / "cache", true, 2));
  RequireSameImage(plain, warm_parallel);

  SECTION("another capture policy does not use those entries") {
    LoadOptions o = Options(tmp / "cache", true, 1);
    o.capture_id = "prefix-65";
    CHECK_THROWS_AS(Load(ref, o), util::Fatal);
  }
  SECTION("a corrupt entry is rebuilt from the blob, which must then be intact") {
    fs::path entry =
        cache.EntryPath({written.layers[0].digest, written.layers[0].diff_id, "prefix-64"});
    testing::WriteFile(entry, "garbage");
    CHECK_THROWS_AS(Load(ref, Options(tmp / "cache", true, 1)), util::Fatal);
    CHECK_FALSE(fs::exists(entry));
  }
}

// A shared tier in memory (what serve's facts store is over Redis), counting what it is asked.
class MemoryTier : public SharedLayers {
 public:
  std::optional<std::string> Get(const std::string& name) override {
    std::lock_guard lock(mu_);
    ++gets;
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  }
  void Put(const std::string& name, std::string_view value) override {
    std::lock_guard lock(mu_);
    values[name] = std::string(value);
  }
  void Discard(const std::string& name, std::string_view why) override {
    std::lock_guard lock(mu_);
    discarded.emplace_back(name + " " + std::string(why));
  }
  std::map<std::string, std::string> values;
  std::vector<std::string> discarded;
  int gets = 0;

 private:
  std::mutex mu_;
};

TEST_CASE("a shared tier saves another machine the blobs, and what fails is discarded",
          "[layer_cache][load]") {
  TempDir tmp;
  testing::WrittenImage written = testing::WriteOciLayout(tmp / "layout", BaseRecipe());
  std::string ref = "oci:" + (tmp / "layout").string() + ":latest";
  Image plain = Load(ref, Options(tmp / "none", false, 1));
  auto tier = std::make_shared<MemoryTier>();
  auto with_tier = [&](const fs::path& dir, bool use_cache) {
    LoadOptions o = Options(dir, use_cache, 2);
    o.shared_layers = tier;
    return o;
  };
  // One machine reads the blobs: its readings and the config go to the tier too.
  RequireSameImage(plain, Load(ref, with_tier(tmp / "one", true)));
  for (const testing::WrittenLayer& l : written.layers)
    CHECK(tier->values.count("layer:" + LayerKey{l.digest, l.diff_id, "prefix-64"}.Hex()) == 1);
  CHECK(tier->values.count("config:" + written.config_digest) == 1);
  CHECK(tier->values.size() == written.layers.size() + 1);

  // Every blob is now garbage, the config included: another machine, with no cache of its own
  // or an empty one, reads the image from the tier alone.
  for (const auto& e : fs::directory_iterator(tmp / "layout" / "blobs" / "sha256"))
    if (e.path().filename() != written.manifest_digest.substr(7)) Damage(e.path());
  RequireSameImage(plain, Load(ref, with_tier(tmp / "two", false)));
  CHECK_FALSE(fs::exists(tmp / "two"));
  RequireSameImage(plain, Load(ref, with_tier(tmp / "three", true)));
  // ...and keeps what it found: its own cache now holds the readings.
  LayerCache three(tmp / "three");
  for (const testing::WrittenLayer& l : written.layers)
    CHECK(fs::exists(three.EntryPath({l.digest, l.diff_id, "prefix-64"})));
  CHECK(tier->discarded.empty());

  SECTION("a value that does not parse, or is another layer's, is discarded, not used") {
    const testing::WrittenLayer& l0 = written.layers[0];
    const testing::WrittenLayer& l1 = written.layers[1];
    std::string n0 = "layer:" + LayerKey{l0.digest, l0.diff_id, "prefix-64"}.Hex();
    std::string n1 = "layer:" + LayerKey{l1.digest, l1.diff_id, "prefix-64"}.Hex();
    tier->values[n0] = tier->values[n1];
    tier->values[n1] = "garbage";
    CHECK_THROWS_AS(Load(ref, with_tier(tmp / "four", false)), util::Fatal);  // the blobs
    CHECK_THAT(tier->discarded, Catch::Matchers::VectorContains(n0 + " is another layer's") ||
                                    Catch::Matchers::VectorContains(n1 + " does not parse"));
  }
  SECTION("a config whose bytes are not its digest's is discarded, not used") {
    tier->values["config:" + written.config_digest] += " ";
    CHECK_THROWS_AS(Load(ref, with_tier(tmp / "four", false)), util::Fatal);  // the blob
    CHECK(tier->discarded == std::vector<std::string>{"config:" + written.config_digest +
                                                      " does not match its digest"});
  }
}

TEST_CASE("a new image sharing base layers reads only its new layers", "[layer_cache][load]") {
  TempDir tmp;
  testing::ImageRecipe base = BaseRecipe();
  testing::WrittenImage base_written = testing::WriteOciLayout(tmp / "base", base);
  Load("oci:" + (tmp / "base").string(), Options(tmp / "cache", true, 1));

  testing::ImageRecipe derived = BaseRecipe();
  derived.layers.push_back(testing::MakeLayer({testing::File("app/main.py", "print(1)\n")},
                                              testing::Compression::kGzip, "app"));
  testing::WrittenImage written = testing::WriteOciLayout(tmp / "derived", derived);
  REQUIRE(written.layers[0].digest == base_written.layers[0].digest);
  // The shared layers' blobs are damaged: only the new one may be read.
  for (size_t i = 0; i < 2; ++i)
    Damage(tmp / "derived" / "blobs" / "sha256" / written.layers[i].digest.substr(7));
  Image img = Load("oci:" + (tmp / "derived").string(), Options(tmp / "cache", true, 2));
  CHECK(img.tree.Find("/app/main.py"));
  CHECK(img.tree.Find("/usr/lib/libcublas.so"));
  CHECK(img.layers.size() == 3);
}

TEST_CASE("legacy docker-archive layers, which have no digest, are cached by diff_id",
          "[layer_cache][load]") {
  TempDir tmp;
  testing::ImageRecipe r = BaseRecipe();
  testing::WrittenImage written = testing::WriteDockerArchive(tmp / "a.tar", r);
  std::string ref = "docker-archive:" + (tmp / "a.tar").string();
  Image plain = Load(ref, Options(tmp / "cache", false, 1));
  Image cold = Load(ref, Options(tmp / "cache", true, 2));
  RequireSameImage(plain, cold);
  LayerCache cache(tmp / "cache");
  for (const testing::WrittenLayer& l : written.layers)
    CHECK(fs::exists(cache.EntryPath({"", l.diff_id, "prefix-64"})));

  // The same config (so the same diff_ids) over layers of garbage: only cache hits can read it.
  testing::ImageRecipe fake = r;
  for (size_t i = 0; i < fake.layers.size(); ++i) {
    fake.layers[i].raw = "garbage";
    fake.layers[i].raw_diff_id = written.layers[i].diff_id;
  }
  testing::WrittenImage fake_written = testing::WriteDockerArchive(tmp / "b.tar", fake);
  REQUIRE(fake_written.config_digest == written.config_digest);
  std::string fake_ref = "docker-archive:" + (tmp / "b.tar").string();
  CHECK_THROWS_AS(Load(fake_ref, Options(tmp / "cache", false, 1)), util::Fatal);
  RequireSameImage(plain, Load(fake_ref, Options(tmp / "cache", true, 1)));
}

// Digests (DigestRule): a test rule where a file named "stated" lists the paths whose MD5 the
// layers above it must take, like a dpkg md5sums.
DigestRule StatedFiles(std::atomic<int>* calls = nullptr) {
  DigestRule rule;
  rule.stated = [calls](const LayerContents& layer, const Tree&) {
    if (calls) ++*calls;
    std::vector<std::string> paths;
    for (const LayerEntry& e : layer.entries)
      if (util::BaseName(e.path) == "stated" && e.content)
        for (const std::string& p : util::Split(*e.content->ViewFrom(0), '\n'))
          if (!p.empty()) paths.push_back(p);
    return paths;
  };
  return rule;
}

// Three layers: the base installs a and b and states them; the next writes over a, deletes b,
// adds c (unstated) and states c; the top writes over c and over a again, and makes /opt
// opaque.
testing::ImageRecipe DigestRecipe() {
  using namespace testing;
  const std::string a(3000, 'a'), b(3000, 'b');
  ImageRecipe r;
  r.layers.push_back(
      MakeLayer({File("usr/lib/a.so", a), File("usr/lib/b.so", b), File("opt/x", "x"),
                 File("var/stated", "/usr/lib/a.so\n/usr/lib/b.so\n")},
                Compression::kGzip, "install a b"));
  r.layers.push_back(MakeLayer(
      {File("usr/lib/a.so", a + "2"), Whiteout("usr/lib/b.so"),
       File("usr/lib/c.so", std::string(3000, 'c')), File("var/lib/stated", "/usr/lib/c.so\n")},
      Compression::kZstd, "over a, rm b, add c"));
  r.layers.push_back(MakeLayer(
      {File("usr/lib/c.so", "c3"), File("usr/lib/a.so", a), Opaque("opt"), File("opt/y", "y")},
      Compression::kGzip, "over c and a"));
  return r;
}

TEST_CASE("digests: only files that layers below state, the same for any --jobs and cached",
          "[layer_cache][load][digest]") {
  TempDir tmp;
  testing::WrittenImage written = testing::WriteOciLayout(tmp / "layout", DigestRecipe());
  std::string ref = "oci:" + (tmp / "layout").string() + ":latest";
  auto load = [&](bool use_cache, int jobs) {
    LoadOptions o = Options(tmp / "cache", use_cache, jobs);
    o.digests = StatedFiles();
    return Load(ref, o);
  };
  Image one = load(false, 1);
  auto md5 = [](const Image& img, const std::string& path) {
    const Node* n = img.tree.Find(path);
    REQUIRE(n);
    REQUIRE(n->content);
    return n->content->md5();
  };
  // a, written over by the top layer, stated by the base: digested.
  CHECK(md5(one, "/usr/lib/a.so") == util::Md5Hex(std::string(3000, 'a')));
  // c, written over by the top layer, stated by the middle one: digested.
  CHECK(md5(one, "/usr/lib/c.so") == util::Md5Hex("c3"));
  // The files of the layer that states them are not.
  CHECK(md5(one, "/var/stated").empty());
  Image base_only = [&] {
    LoadOptions o = Options(tmp / "cache", false, 1);
    o.digests = StatedFiles();
    o.read_layer = [](int layer) { return layer == 0; };
    return Load(ref, o);
  }();
  CHECK(md5(base_only, "/usr/lib/a.so").empty());
  CHECK(md5(base_only, "/usr/lib/b.so").empty());

  for (int jobs : {2, 3}) {
    INFO("jobs " << jobs);
    for (int i = 0; i < 3; ++i) RequireSameImage(one, load(false, jobs));
  }
  RequireSameImage(one, load(true, 3));  // cold: stores the readings
  RequireSameImage(one, load(true, 1));  // warm
  RequireSameImage(one, load(true, 2));

  SECTION("a cached reading taken without the digest a scan now wants is read again") {
    // The top layer alone first: nothing below states anything, so nothing is digested.
    testing::ImageRecipe top_only;
    top_only.layers = {DigestRecipe().layers[2]};
    REQUIRE(testing::WriteOciLayout(tmp / "top", top_only).layers[0].digest ==
            written.layers[2].digest);
    LoadOptions o = Options(tmp / "cache2", true, 1);
    o.digests = StatedFiles();
    Image alone = Load("oci:" + (tmp / "top").string(), o);
    CHECK(md5(alone, "/usr/lib/a.so").empty());
    o.jobs = 2;
    RequireSameImage(one, Load(ref, o));
    RequireSameImage(one, Load(ref, o));
  }
}

TEST_CASE("a capture policy without an identity is never cached", "[layer_cache][load]") {
  TempDir tmp;
  testing::WriteOciLayout(tmp / "layout", BaseRecipe());
  LoadOptions o = Options(tmp / "cache", true, 1);
  o.capture_id.clear();
  Load("oci:" + (tmp / "layout").string(), o);
  CHECK((!fs::exists(tmp / "cache" / "layers") || fs::is_empty(tmp / "cache" / "layers")));
}

}  // namespace
}  // namespace imgcheck::image
