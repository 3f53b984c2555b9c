// The layer byte streams: HashingReader's chunks and digest, and the Decompressor fed chunks of
// every size, whose look-aheads (magic bytes, the next gzip member) straddle chunk boundaries.
#include "image/stream.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <optional>
#include <random>

#include "image_writer.h"
#include "support.h"
#include "util/error.h"

namespace imgcheck::image {
namespace {

namespace fs = std::filesystem;
using namespace imgcheck::testing;
using Catch::Matchers::Contains;

// Hands out `bytes` in chunks of `size`, each copied into one of two buffers used in turn; the
// buffer a chunk came from is poisoned when it is reused, so a reader that keeps a chunk longer
// than ChunkReader allows sees garbage.
class PoisoningChunks : public ChunkReader {
 public:
  PoisoningChunks(std::string bytes, size_t size) : bytes_(std::move(bytes)), size_(size) {}
  std::string_view Next() override {
    std::string& slot = slots_[next_++ % 2];
    slot.assign(slot.size(), '\xAA');
    size_t n = std::min(size_, bytes_.size() - at_);
    slot.assign(bytes_, at_, n);
    at_ += n;
    return slot;
  }

 private:
  std::string bytes_;
  size_t size_, at_ = 0;
  std::string slots_[2];
  int next_ = 0;
};

// Reads `in` to the end with reads of varying size.
std::string ReadAll(BlobReader& in) {
  std::string out;
  std::vector<char> buf(70000);
  for (size_t k = 1;; k = k * 3 % 69997 + 1) {
    size_t got = in.Read(buf.data(), k);
    if (got == 0) return out;
    out.append(buf.data(), got);
  }
}

std::string Sample(size_t n) {
  std::mt19937 rng(7);
  std::string s;
  while (s.size() < n) {
    if (rng() % 2)
      s.append(300, static_cast<char>('a' + rng() % 26));
    else
      for (int i = 0; i < 300; ++i) s.push_back(static_cast<char>(rng()));
  }
  s.resize(n);
  return s;
}

std::string Compress(const std::string& plain, testing::Compression c, const fs::path& dir) {
  WriteFile(dir / "in", plain);
  CompressFile(dir / "in", dir / "out", c);
  return ReadFile(dir / "out");
}

class StringBlob : public BlobReader {
 public:
  explicit StringBlob(std::string s) : s_(std::move(s)) {}
  size_t Read(char* buf, size_t n) override {
    n = std::min({n, s_.size() - at_, size_t{4093}});  // short reads, as from a socket
    std::memcpy(buf, s_.data() + at_, n);
    at_ += n;
    return n;
  }

 private:
  std::string s_;
  size_t at_ = 0;
};

TEST_CASE("HashingReader hands out 1 MiB chunks and hashes all of them", "[stream]") {
  std::string bytes = Sample((3 << 20) + 12345);
  StringBlob blob(bytes);
  HashingReader reader(blob);
  std::string_view first = reader.Next();
  CHECK(first.size() == (1u << 20));
  CHECK(first == std::string_view(bytes).substr(0, 1 << 20));
  std::string_view second = reader.Next();
  CHECK(first == std::string_view(bytes).substr(0, 1 << 20));  // still valid after one more
  CHECK(second == std::string_view(bytes).substr(1 << 20, 1 << 20));
  CHECK(reader.Finish() == util::Sha256Digest(bytes));
  CHECK(reader.count() == bytes.size());
  CHECK(reader.Finish() == util::Sha256Digest(bytes));  // asked twice, same answer
  CHECK(reader.Next().empty());
}

TEST_CASE("the Decompressor reads chunks of any size", "[stream]") {
  TempDir tmp;
  std::string plain = Sample(600000);
  std::string gz = Compress(plain, testing::Compression::kGzip, tmp.path());
  // Two members whose boundary lands inside chunks and across them.
  std::string gz2 = Compress(plain.substr(0, 1000), testing::Compression::kGzip, tmp.path()) +
                    Compress(plain.substr(1000), testing::Compression::kGzip, tmp.path());
  std::string zst = Compress(plain, testing::Compression::kZstd, tmp.path());
  struct Case {
    const char* name;
    std::string stored;
    Compression expect;
  } cases[] = {{"gzip", gz, Compression::kGzip},
               {"gzip, two members", gz2, Compression::kGzip},
               {"gzip, trailing zeros", gz + std::string(700, '\0'), Compression::kGzip},
               {"zstd", zst, Compression::kZstd},
               {"plain", plain, Compression::kNone}};
  for (const Case& c : cases) {
    for (size_t chunk : {size_t{1}, size_t{2}, size_t{5}, size_t{4093}, size_t{1} << 20}) {
      INFO(c.name << ", chunks of " << chunk);
      PoisoningChunks in(c.stored, chunk);
      Decompressor d(in);
      CHECK(d.compression() == c.expect);
      CHECK(ReadAll(d) == plain);
    }
  }
}

TEST_CASE("the Decompressor refuses zstd windows above its limit before allocating them",
          "[stream][bad]") {
  // RFC 8878 frame header: Window_Descriptor 0xA8 asks for 2^31 bytes; then one empty last block.
  const std::string two_gb("\x28\xB5\x2F\xFD\x00\xA8\x01\x00\x00", 9);
  PoisoningChunks in(two_gb, 4);
  Decompressor d(in);  // the default limit, 128 MiB
  char buf[16];
  CHECK_THROWS_WITH(d.Read(buf, sizeof buf),
                    "a zstd frame's window exceeds imgcheck's limit of 128 MiB (raise it with "
                    "--max-zstd-window-mb)");
  // A 16 MiB window (exponent 14): refused under an 8 MiB limit, decoded under the default.
  const std::string sixteen_mb("\x28\xB5\x2F\xFD\x00\x70\x01\x00\x00", 9);
  PoisoningChunks small(sixteen_mb, 3);
  Decompressor narrow(small, 8u << 20);
  CHECK_THROWS_WITH(narrow.Read(buf, sizeof buf), Catch::Matchers::Contains("limit of 8 MiB"));
  PoisoningChunks again(sixteen_mb, 3);
  Decompressor wide(again);
  CHECK(wide.Read(buf, sizeof buf) == 0);
}

TEST_CASE("the Decompressor refuses truncated and corrupt streams at any chunk size",
          "[stream][bad]") {
  TempDir tmp;
  std::string plain = Sample(200000);
  std::string gz = Compress(plain, testing::Compression::kGzip, tmp.path());
  std::string zst = Compress(plain, testing::Compression::kZstd, tmp.path());
  std::string flipped = gz;
  flipped[flipped.size() - 6] ^= 0x55;  // inside the CRC-32 of the trailer
  struct Case {
    const char* name;
    std::string stored;
    const char* message;
  } cases[] = {{"gzip cut in the data", gz.substr(0, gz.size() / 2), "truncated gzip stream"},
               {"gzip cut in the trailer", gz.substr(0, gz.size() - 3), "truncated gzip stream"},
               {"gzip checksum", flipped, "corrupt gzip stream (checksum mismatch)"},
               {"zstd cut", zst.substr(0, zst.size() - 10), "truncated zstd stream"},
               {"bzip2", "BZh91AY&SY", "bzip2-compressed layers are not supported"},
               {"xz",
                std::string("\xfd"
                            "7zXZ\0\0\0",
                            8),
                "xz-compressed layers are not supported"}};
  for (const Case& c : cases) {
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{1} << 20}) {
      INFO(c.name << ", chunks of " << chunk);
      PoisoningChunks in(c.stored, chunk);
      CHECK_THROWS_WITH(([&] {
                          Decompressor d(in);
                          ReadAll(d);
                        }()),
                        Contains(c.message));
    }
  }
}

TEST_CASE("damaged streams are refused with util::Fatal, or decode to what they checksum",
          "[stream][bad]") {
  TempDir tmp;
  std::string plain = Sample(50000);
  std::mt19937 rng(11);
  struct Format {
    testing::Compression writer;
    Compression detected;
    bool checksummed;  // libarchive's zstd filter writes frames without XXH64 content checksum
  } formats[] = {{testing::Compression::kGzip, Compression::kGzip, true},
                 {testing::Compression::kZstd, Compression::kZstd, false}};
  for (const Format& f : formats) {
    std::string stored = Compress(plain, f.writer, tmp.path());
    for (int i = 0; i < 400; ++i) {
      std::string bad = stored;
      for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
        auto flip = static_cast<unsigned char>(1 + rng() % 255);
        size_t at = rng() % bad.size();
        bad[at] = static_cast<char>(static_cast<unsigned char>(bad[at]) ^ flip);
      }
      bool truncated = rng() % 4 == 0;
      if (truncated) bad.resize(rng() % bad.size());
      PoisoningChunks in(bad, 1 + rng() % 5000);
      std::optional<Compression> detected;
      try {
        Decompressor d(in);
        detected = d.compression();
        std::string out = ReadAll(d);
        // Damage that hid the magic bytes makes the stream "plain": the tar reader refuses it.
        if (detected != f.detected) continue;
        INFO("mutation " << i << (truncated ? ", truncated" : ""));
        CHECK_FALSE(truncated);  // a compressed stream that ends early is always noticed
        if (f.checksummed) CHECK(out == plain);
      } catch (const util::Fatal&) {
      }
    }
  }
}

}  // namespace
}  // namespace imgcheck::image
