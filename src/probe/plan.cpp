#include <algorithm>
#include <map>

#include "probe/probe.h"

namespace imgcheck::probe {

std::string RoleOf(std::string_view soname) {
  std::string_view s = soname;
  if (s.starts_with("lib")) s.remove_prefix(3);
  if (size_t so = s.find(".so"); so != std::string_view::npos) s = s.substr(0, so);
  return std::string(s);
}

std::vector<PlannedLibrary> LoadOrder(const Plan& plan) {
  const auto& libs = plan.libraries;
  std::map<std::string, size_t, std::less<>> by_soname;
  for (size_t i = 0; i < libs.size(); ++i) by_soname.emplace(libs[i].soname, i);
  // Depth-first post-order over NEEDED edges inside the plan: dependencies first, as ld.so
  // initialises them. `state` 1 = in progress (a cycle is broken there), 2 = emitted.
  std::vector<int> state(libs.size(), 0);
  std::vector<PlannedLibrary> out;
  auto visit = [&](auto& self, size_t i) -> void {
    if (state[i] != 0) return;
    state[i] = 1;
    for (const auto& n : libs[i].needed)
      if (auto it = by_soname.find(n); it != by_soname.end()) self(self, it->second);
    state[i] = 2;
    out.push_back(libs[i]);
  };
  for (size_t i = 0; i < libs.size(); ++i) visit(visit, i);
  return out;
}

}  // namespace imgcheck::probe
