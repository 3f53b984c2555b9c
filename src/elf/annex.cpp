#include "elf/annex.h"

#include <algorithm>

#include "util/reader.h"

namespace imgcheck::elf {
namespace {

constexpr std::string_view kMagic = "ELFA";
constexpr uint32_t kHasKeys = 1;

template <class T>
void Put(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

const StringHash* Annex::Find(uint64_t offset) const {
  auto it = std::lower_bound(strings.begin(), strings.end(), offset,
                             [](const StringHash& s, uint64_t o) { return s.offset < o; });
  return it != strings.end() && it->offset == offset ? &*it : nullptr;
}

std::string EncodeAnnex(const Annex& annex) {
  std::string out(kMagic);
  out.reserve(16 + annex.keys.size() * 8 + annex.strings.size() * 20);
  Put<uint32_t>(out, annex.has_keys ? kHasKeys : 0);
  Put<uint32_t>(out, static_cast<uint32_t>(annex.keys.size()));
  for (uint64_t k : annex.keys) Put<uint64_t>(out, k);
  Put<uint32_t>(out, static_cast<uint32_t>(annex.strings.size()));
  for (const StringHash& s : annex.strings) {
    Put<uint64_t>(out, s.offset);
    Put<uint32_t>(out, s.length);
    Put<uint64_t>(out, s.hash);
  }
  return out;
}

std::optional<Annex> DecodeAnnex(std::string_view bytes) {
  util::Reader r(bytes, false);
  auto magic = r.Bytes(kMagic.size());
  auto flags = r.Read<uint32_t>();
  auto nkeys = r.Read<uint32_t>();
  if (!magic || *magic != kMagic || !flags || (*flags & ~kHasKeys) != 0 || !nkeys ||
      *nkeys > r.remaining() / 8)
    return std::nullopt;
  Annex a;
  a.has_keys = (*flags & kHasKeys) != 0;
  a.keys.reserve(*nkeys);
  for (uint32_t i = 0; i < *nkeys; ++i) {
    uint64_t k = *r.Read<uint64_t>();
    if (!a.keys.empty() && k <= a.keys.back()) return std::nullopt;
    a.keys.push_back(k);
  }
  auto nstrings = r.Read<uint32_t>();
  if (!nstrings || *nstrings > r.remaining() / 20) return std::nullopt;
  a.strings.reserve(*nstrings);
  for (uint32_t i = 0; i < *nstrings; ++i) {
    StringHash s;
    s.offset = *r.Read<uint64_t>();
    s.length = *r.Read<uint32_t>();
    s.hash = *r.Read<uint64_t>();
    if (!a.strings.empty() && s.offset <= a.strings.back().offset) return std::nullopt;
    a.strings.push_back(s);
  }
  if (r.remaining() != 0) return std::nullopt;
  return a;
}

}  // namespace imgcheck::elf
