// `imgcheck layers IMAGE`: each layer's digest, sizes, history line and what it changed.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "report/escape.h"
#include "util/error.h"
#include "util/text.h"

namespace imgcheck::cli {
namespace {

struct LayersArgs {
  ImageArgs image;
  std::string format = "text";
};

struct LayersFormat {
  std::string_view name, summary;
  std::string (*render)(const image::Image&);
};

// A history line on one line: whitespace runs collapsed, long ones cut.
std::string OneLine(const std::string& s, size_t max) {
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

std::string RenderText(const image::Image& img) {
  std::string out = "image:    " + report::Visible(img.reference) + "\n";
  if (!img.manifest_digest.empty()) out += "manifest: " + img.manifest_digest + "\n";
  if (!img.config_digest.empty()) out += "config:   " + img.config_digest + "\n";
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
    out += line + report::Visible(OneLine(l.created_by, 100)) + "\n";
  }
  if (!img.diagnostics.empty()) {
    out += "\n" + std::to_string(img.diagnostics.size()) + " diagnostic(s):\n";
    for (const util::Diagnostic& d : img.diagnostics)
      out += "  " + (d.layer >= 0 ? "layer " + std::to_string(d.layer) + " " : std::string()) +
             (d.path.empty() ? "" : report::Visible(d.path) + ": ") + report::Visible(d.message) +
             "\n";
  }
  return report::VisibleLines(out);
}

std::string RenderJson(const image::Image& img) {
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
  for (const util::Diagnostic& d : img.diagnostics)
    j["diagnostics"].push_back({{"path", d.path}, {"layer", d.layer}, {"message", d.message}});
  // Invalid UTF-8 in names or history lines must not abort the output.
  return report::DumpJson(j, 2) + "\n";
}

const std::vector<LayersFormat>& Formats() {
  static const std::vector<LayersFormat> kFormats = {
      {"text", "a table for people", RenderText},
      {"json", "one JSON document", RenderJson},
  };
  return kFormats;
}

}  // namespace

Runner DefineLayers(CLI::App& sub) {
  auto args = std::make_shared<LayersArgs>();
  AddImageArgs(sub, args->image);
  std::vector<std::string> names;
  std::string help = "output format:";
  for (const LayersFormat& f : Formats()) {
    names.emplace_back(f.name);
    help += " " + std::string(f.name) + " (" + std::string(f.summary) + ")";
  }
  sub.add_option("-f,--format", args->format, help)
      ->check(CLI::IsMember(names))
      ->capture_default_str();
  return [args]() -> int {
    // The catalog's capture policy, so that cached layers serve every subcommand alike.
    rules::Knowledge knowledge = LoadKnowledge({});
    image::Image img =
        image::Load(args->image.reference, ToLoadOptions(args->image, knowledge.libraries()));
    for (const LayersFormat& f : Formats())
      if (f.name == args->format) std::cout << f.render(img) << std::flush;
    return 0;
  };
}

}  // namespace imgcheck::cli
