#include "report/graph.h"

#include "report/escape.h"
#include "report/report.h"

namespace imgcheck::report {

std::string MermaidText(std::string_view s) {
  std::string out;
  for (char c : Visible(s)) {
    switch (c) {
      case '"':
      case '#':
      case '%':
      case '<':
      case '>':
      case '&':
      case '`':
      case '|':
        out += "#" + std::to_string(static_cast<int>(c)) + ";";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string MermaidChain(const loader::Resolution& r, const LayerOf& layer_of) {
  auto node = [](const std::string& id, const std::string& label) {
    return "  " + id + "[\"" + label + "\"]\n";
  };
  std::string out = "flowchart LR\n";
  std::string consumer = MermaidText(r.consumer.empty() ? "(the root)" : r.consumer);
  if (layer_of && !r.consumer.empty())
    if (rules::LayerRef l = layer_of(r.consumer); l.index >= 0)
      consumer += "<br/>layer " + std::to_string(l.index);
  out += node("n0", consumer);
  out += node("n1", MermaidText(r.name));
  out += std::string("  n0 -->|") + (r.kind == loader::Kind::kDlopen ? "dlopen" : "DT_NEEDED") +
         "| n1\n";
  if (r.found()) {
    std::string file = MermaidText(r.real_path);
    if (layer_of)
      if (rules::LayerRef l = layer_of(r.real_path); l.index >= 0)
        file += "<br/>layer " + std::to_string(l.index) +
                (l.created_by.empty() ? "" : ": " + MermaidText(l.created_by));
    out += node("n2", file);
    out += "  n1 -->|" + MermaidText(ResolutionReason(r)) + "| n2\n";
    return out;
  }
  out += node("n2", MermaidText(rules::UnresolvedText(r)));
  out += "  n1 ==> n2\n";
  out += "  linkStyle 1 stroke:#d00,stroke-width:3px\n";
  return out;
}

}  // namespace imgcheck::report
