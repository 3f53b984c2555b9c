#include "util/sparse_file.h"

#include <algorithm>

namespace imgcheck::util {

SparseFile SparseFile::Whole(std::string bytes) {
  SparseFile f(bytes.size());
  if (!bytes.empty()) f.extents_.push_back({0, std::move(bytes)});
  return f;
}

bool SparseFile::complete() const {
  if (size_ == 0) return true;
  return extents_.size() == 1 && extents_[0].offset == 0 && extents_[0].bytes.size() == size_;
}

namespace {

// The extents overlapping or touching [offset, end), as [first, last).
template <class It>
std::pair<It, It> Touching(It begin, It end_it, uint64_t offset, uint64_t end) {
  auto first = std::lower_bound(
      begin, end_it, offset,
      [](const SparseFile::Extent& e, uint64_t off) { return e.offset + e.bytes.size() < off; });
  auto last = first;
  while (last != end_it && last->offset <= end) ++last;
  return {first, last};
}

}  // namespace

void SparseFile::Add(uint64_t offset, std::string_view bytes) {
  if (bytes.empty()) return;
  // Past the last extent, not touching it: how a capturer and a cached reading add them.
  if (extents_.empty() || offset > extents_.back().offset + extents_.back().bytes.size()) {
    extents_.push_back(Extent{offset, std::string(bytes)});
    return;
  }
  uint64_t end = offset + bytes.size();
  auto [first, last] = Touching(extents_.begin(), extents_.end(), offset, end);
  if (first == last) {
    extents_.insert(first, Extent{offset, std::string(bytes)});
    return;
  }
  // One extent that starts at or before `offset`: extend it in place, so a capturer adding
  // consecutive chunks costs linear, not quadratic, copying.
  if (last - first == 1 && first->offset <= offset) {
    std::string& b = first->bytes;
    uint64_t at = offset - first->offset;
    if (at + bytes.size() > b.size()) b.resize(at + bytes.size());
    b.replace(at, bytes.size(), bytes);
    return;
  }
  uint64_t new_start = std::min(offset, first->offset);
  uint64_t new_end = std::max(end, (last - 1)->offset + (last - 1)->bytes.size());
  std::string merged;
  merged.reserve(new_end - new_start);
  for (auto it = first; it != last; ++it) {
    // Gaps between kept extents lie inside [offset, end) and are filled by `bytes` below.
    merged.resize(it->offset - new_start);
    merged += it->bytes;
  }
  if (merged.size() < new_end - new_start) merged.resize(new_end - new_start);
  merged.replace(offset - new_start, bytes.size(), bytes);
  auto pos = extents_.erase(first, last);
  extents_.insert(pos, Extent{new_start, std::move(merged)});
}

void SparseFile::Take(uint64_t offset, std::string&& bytes) {
  if (bytes.empty()) return;
  auto [first, last] = Touching(extents_.begin(), extents_.end(), offset, offset + bytes.size());
  if (first == last) {
    extents_.insert(first, Extent{offset, std::move(bytes)});
    return;
  }
  Add(offset, std::string_view(bytes));
}

std::optional<std::string_view> SparseFile::ViewFrom(uint64_t offset) const {
  auto it = std::upper_bound(extents_.begin(), extents_.end(), offset,
                             [](uint64_t off, const Extent& e) { return off < e.offset; });
  if (it == extents_.begin()) return std::nullopt;
  --it;
  if (offset - it->offset >= it->bytes.size()) return std::nullopt;
  return std::string_view(it->bytes).substr(offset - it->offset);
}

std::optional<std::string_view> SparseFile::View(uint64_t offset, uint64_t len) const {
  if (len == 0) return offset <= size_ ? std::optional<std::string_view>("") : std::nullopt;
  auto from = ViewFrom(offset);
  if (!from || from->size() < len) return std::nullopt;
  return from->substr(0, len);
}

uint64_t SparseFile::captured_bytes() const {
  uint64_t n = 0;
  for (const auto& e : extents_) n += e.bytes.size();
  return n;
}

}  // namespace imgcheck::util
