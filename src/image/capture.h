// What later stages keep of file contents while a layer streams past.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "util/capturer.h"
#include "util/sparse_file.h"

namespace imgcheck::image {

/// The capturer interface lives in util (elf implements it without depending on image).
using Capturer = util::Capturer;

/// Chooses per regular file whether (non-null) and how its bytes are captured. Called from the
/// threads that read layers, so it must be thread-safe. `path` is normalised and absolute;
/// `mode` holds the permission bits (07777).
using CapturePolicy =
    std::function<std::unique_ptr<Capturer>(std::string_view path, uint64_t size, uint32_t mode)>;

/// Keeps the first `limit` bytes (the whole file when it is no longer): for small metadata files.
std::unique_ptr<Capturer> CapturePrefix(uint64_t limit);

/// Keeps what `inner` keeps and hashes every byte on the way (MD5, streamed: nothing more is
/// held), so the result's md5() is the whole file's; left empty when the stream ended short.
std::unique_ptr<Capturer> CaptureWithMd5(std::unique_ptr<Capturer> inner);

}  // namespace imgcheck::image
