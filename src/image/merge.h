// Applies layers, bottom first, to the merged tree: OCI whiteouts, replacement, provenance.
#pragma once

#include <vector>

#include "image/layer.h"
#include "image/tree.h"
#include "util/error.h"

namespace imgcheck::image {

struct LayerStats {
  int added = 0, changed = 0, deleted = 0;
};

/// Applies `contents` as layer `layer` on top of `tree`, as umoci's OCI unpacker (and
/// containerd's applier) do:
///  - each entry's parent directory is resolved through the symlinks already in the tree, inside
///    the root; missing parents are created;
///  - an entry replaces what was at its path (and that path's subtree), except that a directory
///    over a directory keeps the children;
///  - `.wh.NAME` removes NAME and its subtree and `.wh..wh..opq` the directory's children, but
///    only what lower layers wrote: paths this layer writes survive whatever the entry order
///    (OCI image-spec layer.md "Whiteouts"); a whiteout of a missing path does nothing;
///  - hard links copy their target's node (the target must already exist).
/// Problems that leave the rest usable become diagnostics.
LayerStats Merge(Tree& tree, const LayerContents& contents, int layer,
                 std::vector<util::Diagnostic>& diagnostics);

}  // namespace imgcheck::image
