// Digest pinning (mutating admission): each image of an object rewritten to the digest its
// decision judged, `repo:tag@sha256:...`, so that the node pulls the bytes that were judged even
// when the tag moves after the review (the tag stays, for people; the runtime pulls by digest).
#pragma once

#include <string>
#include <vector>

#include "rules/config.h"
#include "serve/front/admission.h"

namespace imgcheck::serve::front {

/// Images one object may have pinned (a JSONPatch operation each): a review naming more is
/// answered per --on-error, so that the answer stays a few hundred kilobytes.
inline constexpr size_t kMaxPins = 1024;

/// One image rewritten: the string at `pointer` (ImageUse::pointer) becomes `image`.
struct Pin {
  std::string pointer;
  std::string image;  ///< "registry/repo:tag@sha256:..."
};

struct Pinning {
  std::vector<Pin> pins;
  /// "spec.containers[0] (app) repo:1: why", for images left as written that the validating
  /// webhook may still admit (not resolved); an image its verdict denies is not listed.
  std::vector<std::string> unpinned;
};

/// Pins every image that has a resolved digest and is not denied by its verdict under
/// `fail_on`: passed, not judged yet (pinned to the digest whose scan goes on) or unjudgeable
/// (the validating webhook then applies --on-unknown or --on-error to that digest). A reference
/// that names a digest already is left as written, and so are one without a pointer and one an
/// UPDATE leaves unchanged (pinning it would restart a running container; the pod was pinned
/// when it was created).
Pinning PinImages(const std::vector<ImageResult>& images, rules::FailOn fail_on);

/// The JSONPatch document (RFC 6902) of `pins`: one "replace" per image; empty when none.
std::string JsonPatch(const std::vector<Pin>& pins);

}  // namespace imgcheck::serve::front
