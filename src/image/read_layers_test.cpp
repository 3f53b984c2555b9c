#include "image/read_layers.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "image/progress.h"
#include "support.h"
#include "util/error.h"

namespace imgcheck::image {
namespace {

using testing::TempDir;

// A blob of `n` bytes, read in small chunks.
class FakeBlob : public BlobReader {
 public:
  explicit FakeBlob(size_t n) : left_(n) {}
  size_t Read(char* buf, size_t n) override {
    size_t k = std::min({n, left_, size_t{1000}});
    std::memset(buf, 'x', k);
    left_ -= k;
    return k;
  }

 private:
  size_t left_;
};

std::string Hex(int i, char fill) {
  std::string h(64, fill);
  std::string n = std::to_string(i);
  return h.replace(0, n.size(), n);
}

std::vector<LayerJob> Jobs(int n) {
  std::vector<LayerJob> jobs;
  jobs.reserve(n);
  for (int i = 0; i < n; ++i)
    jobs.push_back({i, {"sha256:" + Hex(i, 'a'), "sha256:" + Hex(i, 'b'), "test"}, 10000, {}});
  return jobs;
}

// A reading of job `j` that says which job it was, after some milliseconds of "work".
LayerContents Reading(const LayerJob& j, const TrackBlob& track, int work_ms) {
  std::unique_ptr<BlobReader> blob = track(std::make_unique<FakeBlob>(j.stored_size));
  char buf[4096];
  while (blob->Read(buf, sizeof buf) > 0) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(work_ms));
  LayerContents c;
  c.digest = j.key.digest;
  c.diff_id = j.key.diff_id;
  LayerEntry e;
  e.path = "/layer" + std::to_string(j.index);
  c.entries.push_back(e);
  c.diagnostics.push_back({e.path, j.index, "read"});
  return c;
}

TEST_CASE("layers are read in parallel, at most `jobs` at once, and merged in order",
          "[read_layers]") {
  for (int jobs : {1, 2, 3, 8}) {
    INFO("jobs " << jobs);
    std::mutex mu;
    int reading = 0, max_reading = 0;
    std::vector<int> started;
    std::vector<int> merged;
    ReadLayersOptions o;
    o.jobs = jobs;
    ReadLayers(
        Jobs(7), o,
        [&](const LayerJob& j, const TrackBlob& track) {
          {
            std::lock_guard lock(mu);
            max_reading = std::max(max_reading, ++reading);
            started.push_back(j.index);
          }
          // Lower layers are slower, so that later ones finish first and must wait.
          LayerContents c = Reading(j, track, (7 - j.index) * 3);
          std::lock_guard lock(mu);
          --reading;
          return c;
        },
        [&](const LayerJob& j, LayerContents& c) {
          std::lock_guard lock(mu);
          REQUIRE(c.entries.size() == 1);
          CHECK(c.entries[0].path == "/layer" + std::to_string(j.index));
          merged.push_back(j.index);
        });
    CHECK(merged == std::vector<int>{0, 1, 2, 3, 4, 5, 6});
    CHECK(max_reading <= jobs);
    if (jobs > 1) CHECK(max_reading > 1);
    if (jobs == 1) CHECK(started == merged);
  }
}

TEST_CASE("the biggest layers are started first", "[read_layers]") {
  std::vector<LayerJob> jobs = Jobs(4);
  jobs[0].stored_size = 5;
  jobs[1].stored_size = 500;
  jobs[2].stored_size = 50;
  jobs[3].stored_size = 5000;
  std::mutex mu;
  std::vector<int> started, merged;
  ReadLayersOptions o;
  o.jobs = 2;
  ReadLayers(
      jobs, o,
      [&](const LayerJob& j, const TrackBlob& track) {
        {
          std::lock_guard lock(mu);
          started.push_back(j.index);
        }
        return Reading(j, track, 20);
      },
      [&](const LayerJob& j, LayerContents&) { merged.push_back(j.index); });
  REQUIRE(started.size() == 4);
  // Two threads: 3 and 1 start together, then 2 and 0 as they finish.
  CHECK(std::set<int>(started.begin(), started.begin() + 2) == std::set<int>{1, 3});
  CHECK(std::set<int>(started.begin() + 2, started.end()) == std::set<int>{0, 2});
  CHECK(merged == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("the lowest failing layer is the one reported, and the rest stop", "[read_layers]") {
  for (int jobs : {1, 2, 4}) {
    INFO("jobs " << jobs);
    std::atomic<int> reads{0};
    std::vector<int> merged;
    ReadLayersOptions o;
    o.jobs = jobs;
    try {
      ReadLayers(
          Jobs(20), o,
          [&](const LayerJob& j, const TrackBlob& track) -> LayerContents {
            ++reads;
            // Layer 3 fails late, layer 4 at once: 3 must still be the one reported.
            if (j.index == 3) {
              std::this_thread::sleep_for(std::chrono::milliseconds(30));
              throw util::Fatal("layer 3 is corrupt");
            }
            if (j.index == 4) throw util::Fatal("layer 4 is corrupt");
            return Reading(j, track, 0);
          },
          [&](const LayerJob& j, LayerContents&) { merged.push_back(j.index); });
      FAIL("no exception");
    } catch (const util::Fatal& e) {
      CHECK(std::string(e.what()) == "layer 3 is corrupt");
    }
    CHECK(merged == std::vector<int>{0, 1, 2});
    if (jobs == 1) CHECK(reads.load() == 4);  // nothing above the failure is started
  }
}

TEST_CASE("a reading above a failure is stopped, not waited for", "[read_layers]") {
  ReadLayersOptions o;
  o.jobs = 2;
  // Layer 1's blob never ends: only the cancellation can stop its reading.
  CHECK_THROWS_WITH(ReadLayers(
                        Jobs(2), o,
                        [&](const LayerJob& j, const TrackBlob& track) -> LayerContents {
                          if (j.index == 0) {
                            std::this_thread::sleep_for(std::chrono::milliseconds(20));
                            throw util::Fatal("layer 0 is corrupt");
                          }
                          std::unique_ptr<BlobReader> blob =
                              track(std::make_unique<FakeBlob>(SIZE_MAX));
                          char buf[4096];
                          while (blob->Read(buf, sizeof buf) > 0) {
                          }
                          return {};
                        },
                        [&](const LayerJob&, LayerContents&) {}),
                    "layer 0 is corrupt");
}

TEST_CASE("a failure while merging stops the readers", "[read_layers]") {
  ReadLayersOptions o;
  o.jobs = 2;
  CHECK_THROWS_WITH(
      ReadLayers(
          Jobs(10), o,
          [&](const LayerJob& j, const TrackBlob& track) { return Reading(j, track, 1); },
          [&](const LayerJob& j, LayerContents&) {
            if (j.index == 1) throw util::Fatal("merge failed");
          }),
      "merge failed");
}

TEST_CASE("cached layers are not read again, uncacheable ones always are", "[read_layers]") {
  TempDir tmp;
  LayerCache cache(tmp.path());
  ReadLayersOptions o;
  o.jobs = 2;
  o.cache = &cache;
  std::vector<LayerJob> jobs = Jobs(4);
  jobs[2].key.diff_id.clear();  // names no content
  std::atomic<int> reads{0};
  auto read = [&](const LayerJob& j, const TrackBlob& track) {
    ++reads;
    return Reading(j, track, 0);
  };
  std::vector<std::string> first, second;
  ReadLayers(jobs, o, read,
             [&](const LayerJob&, LayerContents& c) { first.push_back(c.entries[0].path); });
  CHECK(reads == 4);
  ReadLayers(jobs, o, read, [&](const LayerJob& j, LayerContents& c) {
    second.push_back(c.entries[0].path);
    CHECK(c.diagnostics.at(0).layer == j.index);
  });
  CHECK(reads == 5);
  CHECK(first == second);
}

// Layer i holds the file /f and states /f for the layers above; each reading records the plan
// it was given.
TEST_CASE("a layer is read with the digests the layers below state, again when it missed some",
          "[read_layers][digest]") {
  for (int jobs : {1, 2}) {
    INFO("jobs " << jobs);
    ReadLayersOptions o;
    o.jobs = jobs;
    o.stated = [](const LayerJob&, const LayerContents&) { return std::vector<std::string>{"/f"}; };
    int dropped = 0;
    o.dropped = [&](const LayerContents&) { ++dropped; };
    std::vector<LayerJob> layers = Jobs(2);
    layers[1].stored_size = 20000;  // started first: with 2 jobs, before layer 0 is merged
    std::mutex mu;
    std::vector<std::pair<int, bool>> reads;  // layer, whether its plan wanted /f
    auto read = [&](const LayerJob& j, const TrackBlob& track) {
      {
        std::lock_guard lock(mu);
        reads.emplace_back(j.index, j.digests.Wants("/f"));
      }
      LayerContents c = Reading(j, track, j.index == 0 ? 200 : 0);
      c.entries[0].path = "/f";
      c.entries[0].digest_wanted = j.digests.Wants("/f");
      return c;
    };
    std::vector<bool> merged_wanted;
    ReadLayers(layers, o, read, [&](const LayerJob&, LayerContents& c) {
      merged_wanted.push_back(c.entries[0].digest_wanted);
    });
    // Whatever the jobs, what is merged is the same: the base's own file not digested, the
    // file above it digested.
    CHECK(merged_wanted == std::vector<bool>{false, true});
    if (jobs == 1) {
      CHECK(reads == std::vector<std::pair<int, bool>>{{0, false}, {1, true}});
      CHECK(dropped == 0);
    } else {
      // Layer 1 started with nothing stated yet, and was read again once layer 0 stated /f.
      CHECK(reads.size() == 3);
      CHECK(reads.back() == std::pair<int, bool>{1, true});
      CHECK(dropped == 1);
    }
  }
}

std::string ReadAll(int fd) {
  std::string out;
  lseek(fd, 0, SEEK_SET);
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST_CASE("the progress line shows layers, bytes and rate, and is cleared", "[progress]") {
  TempDir tmp;
  int fd = open((tmp / "err").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  CHECK_FALSE(Progress::ShouldShow(true, fd));  // a file is not a terminal
  CHECK_FALSE(Progress::ShouldShow(false, fd));
  {
    Progress p(true, fd, 3, 3'000'000);
    p.StartLayer(0);
    p.StartLayer(1);
    p.Advance(1'500'000);
    CHECK(p.Line().find("imgcheck: layers 0/3 done, reading 0 1 | 1.5 MB / 3.0 MB") == 0);
    p.FinishLayer(0);
    p.FinishLayer(2, 1'000'000);  // a cache hit: its bytes count as done
    CHECK(p.Line().find("layers 2/3 done, reading 1 | 2.5 MB / 3.0 MB") != std::string::npos);
  }
  std::string out = ReadAll(fd);
  CHECK(out.find("\x1b[Kimgcheck: layers 0/3 done, reading 0") != std::string::npos);
  CHECK(out.find('\n') == std::string::npos);  // one line, rewritten in place
  CHECK(out.size() >= 4);
  CHECK(out.substr(out.size() - 4) == "\r\x1b[K");  // and cleared at the end
  close(fd);
}

TEST_CASE("a disabled progress display writes nothing", "[progress]") {
  TempDir tmp;
  int fd = open((tmp / "err").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  {
    Progress p(false, fd, 2, 100);
    p.StartLayer(0);
    p.Advance(50);
    p.FinishLayer(0);
    p.Clear();
  }
  CHECK(ReadAll(fd).empty());
  close(fd);
}

TEST_CASE("progress is safe to update from many threads", "[progress]") {
  TempDir tmp;
  int fd = open((tmp / "err").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  Progress p(true, fd, 4, 4'000'000);
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&p, t] {
      p.StartLayer(t);
      for (int i = 0; i < 1000; ++i) p.Advance(1000);
      p.FinishLayer(t);
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(p.Line().find("layers 4/4 done | 4.0 MB / 4.0 MB") != std::string::npos);
  close(fd);
}

}  // namespace
}  // namespace imgcheck::image
