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

void SparseFile::Add(uint64_t offset, std::string_view bytes) {
  if (bytes.empty()) return;
  uint64_t end = offset + bytes.size();
  // Find the extents that overlap or touch [offset, end) and fold them into one.
  auto first = std::lower_bound(extents_.begin(), extents_.end(), offset,
                                [](const Extent& e, uint64_t off) {
                                  return e.offset + e.bytes.size() < off;
                                });
  auto last = first;
  while (last != extents_.end() && last->offset <= end) ++last;
  if (first == last) {
    extents_.insert(first, Extent{offset, std::string(bytes)});
    return;
  }
  uint64_t new_start = std::min(offset, first->offset);
  uint64_t new_end = std::max(end, (last - 1)->offset + (last - 1)->bytes.size());
  std::string merged(new_end - new_start, '\0');
  for (auto it = first; it != last; ++it) merged.replace(it->offset - new_start, it->bytes.size(), it->bytes);
  merged.replace(offset - new_start, bytes.size(), bytes);
  auto pos = extents_.erase(first, last);
  extents_.insert(pos, Extent{new_start, std::move(merged)});
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
