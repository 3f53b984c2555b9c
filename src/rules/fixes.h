// Fix texts built from what a finding already knows (private to the rules stage): the exact
// ENV line, pip/apt command or package that realigns the versions or reaches the library.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "rules/context.h"

namespace imgcheck::rules {

/// "a", "a and b", "a, b and c".
std::string JoinAnd(const std::vector<std::string>& items);
/// The image's LD_LIBRARY_PATH without the elements naming `dir`, as the Dockerfile line that
/// sets it ("ENV LD_LIBRARY_PATH=/a:/b", or "ENV LD_LIBRARY_PATH=" when none is left); "" when
/// the image sets none or no element names `dir`.
std::string EnvWithout(const Context& ctx, const std::string& dir);
/// The install of `family` (libraries.json) that `dist` requires ("pip install
/// 'nvidia-cudnn-cu12==9.1.0.70' (what torch 2.4.0 requires)"); "" when it requires none.
std::string RequiredInstall(const Context& ctx, const std::string& family,
                            const catalog::Component* dist);
/// The distribution that owns `path` when pip does, else null.
const catalog::Component* OwningDist(const Context& ctx, const std::string& path);
/// An installed distribution's requirement of another.
struct Requirer {
  const catalog::Component* dist = nullptr;
  const catalog::Requirement* requirement = nullptr;
};
/// The installed pip distribution whose Requires-Dist names `owner` (a pip distribution), extras
/// aside: removing `owner` would break it. Nullopt when none does or `owner` is not pip's.
std::optional<Requirer> RequiredBy(const Context& ctx, const catalog::PackageRef& owner);
/// The command that takes out what `owner` installed, with `why` in parentheses ("pip uninstall
/// nvidia-cudnn-cu11 (it installed ...)", "apt-get remove libcudnn8 (...)", "conda remove cudnn
/// (...)"); when another installed distribution requires `owner`, never that command but "keep
/// X, which torch 2.6.0 requires (X==12.4.127), and " + `instead`.
std::string RemoveOr(const Context& ctx, const catalog::PackageRef& owner, const std::string& why,
                     const std::string& instead);

}  // namespace imgcheck::rules
