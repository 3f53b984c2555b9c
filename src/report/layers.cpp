#include "report/layers.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "report/diagnostics.h"
#include "report/escape.h"
#include "report/image_header.h"
#include "util/text.h"

namespace imgcheck::report {

namespace {

// A history line on one line: whitespace runs collapsed, long ones cut.
std::string CollapsedLine(const std::string& s, size_t max) {
  std::string out;
  for (char c : s) {
    bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.size() > max) out = out.substr(0, max - 3) + "...";
  return out;
}

}  // namespace

std::string RenderLayersText(const image::Image& img) {
  std::string out = ImageText(ImageInfoOf(img, ""));
  char line[512];
  std::snprintf(line, sizeof line, "\n%3s  %-19s  %10s  %10s  %7s  %7s  %7s  %s\n", "#", "DIGEST",
                "COMPRESSED", "SIZE", "ADDED", "CHANGED", "DELETED", "CREATED BY");
  out += line;
  for (const image::Layer& l : img.layers) {
    std::string digest = l.digest.empty() ? "-" : l.digest.substr(0, 19);
    std::snprintf(
        line, sizeof line, "%3d  %-19s  %10s  %10s  %7d  %7d  %7d  ", l.index, digest.c_str(),
        l.digest.empty() && l.compressed_size == 0
            ? "-"
            : util::HumanBytes(static_cast<double>(l.compressed_size)).c_str(),
        util::HumanBytes(static_cast<double>(l.size)).c_str(), l.added, l.changed, l.deleted);
    out += line + Visible(CollapsedLine(l.created_by, 100)) + "\n";
  }
  out += DiagnosticsText(img.diagnostics);
  return VisibleLines(out);
}

std::string RenderLayersJson(const image::Image& img) {
  nlohmann::json j{{"reference", img.reference},
                   {"transport", img.transport},
                   {"manifest_digest", img.manifest_digest},
                   {"config_digest", img.config_digest},
                   {"layers", nlohmann::json::array()},
                   {"diagnostics", nlohmann::json::array()}};
  for (const image::Layer& l : img.layers)
    j["layers"].push_back({{"index", l.index},
                           {"digest", l.digest},
                           {"diff_id", l.diff_id},
                           {"media_type", l.media_type},
                           {"compressed_size", l.compressed_size},
                           {"size", l.size},
                           {"created_by", l.created_by},
                           {"added", l.added},
                           {"changed", l.changed},
                           {"deleted", l.deleted}});
  // nlohmann::json keeps keys sorted, as this document always had them.
  for (const util::Diagnostic& d : img.diagnostics)
    j["diagnostics"].push_back(nlohmann::json(DiagnosticJson(d)));
  // Invalid UTF-8 in names or history lines must not abort the output.
  return DumpJson(j, 2) + "\n";
}

std::string RenderLayers(const image::Image& img, LayersFormat format) {
  return format == LayersFormat::kJson ? RenderLayersJson(img) : RenderLayersText(img);
}

}  // namespace imgcheck::report
