// `imgcheck why --format json|dot|mermaid` through the built binary: the load chain of an image
// written from a recipe, drawn by Graphviz's own `dot` (an SVG read back by Python's XML parser),
// and hostile names that must stay inside their labels in both graph languages.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "elf_builder.h"
#include "image_writer.h"
#include "support.h"

using namespace imgcheck::testing;
using Catch::Matchers::Contains;
using imgcheck::elf::fixture::BuildElf;
using imgcheck::elf::fixture::ElfSpec;

namespace {

const std::string kHostile = "lib\"x\\]-->%%{init: {'theme':'dark'}}%%\n```\xc3\xa9.so";

std::string Lib(const std::string& soname, std::vector<std::string> needed = {},
                const std::string& runpath = "") {
  ElfSpec spec;
  spec.soname = soname;
  spec.needed = std::move(needed);
  spec.runpath = runpath;
  return BuildElf(spec);
}

// The CUDA runtime in layer 0; in layer 1 an application that needs it (found in /usr/lib64)
// and cuDNN 9 (nowhere: its RUNPATH /opt/nv is empty), and a tool that needs a hostile name.
struct ChainImage {
  TempDir tmp;
  WrittenImage written;
  ChainImage() {
    ImageRecipe r;
    r.layers.push_back(MakeLayer({Dir("usr"), Dir("usr/lib64"),
                                  File("usr/lib64/libcudart.so.12", Lib("libcudart.so.12"), 0755)},
                                 Compression::kGzip, "COPY cuda /usr/lib64"));
    r.layers.push_back(
        MakeLayer({Dir("app"), Dir("opt"), Dir("opt/nv"),
                   File("app/libapp.so",
                        Lib("libapp.so", {"libcudart.so.12", "libcudnn.so.9"}, "/opt/nv"), 0755),
                   File("app/libtool.so", Lib("libtool.so", {"libcudart.so.12", kHostile}), 0755)},
                  Compression::kGzip, "COPY app /app"));
    written = WriteOciLayout(tmp / "layout", r);
    WriteFile(tmp / "hostile", kHostile);
  }
  // `imgcheck why <target> --format <format>` on the image: stdout, stderr into tmp/stderr.
  CommandResult Why(const std::string& target, const std::string& format) const {
    return Run("{ " +
               ImgcheckCommand("why --quiet --no-cache oci:" + Quote(tmp / "layout") + " " +
                               target + " --format " + format + " 2>" + Quote(tmp / "stderr")) +
               "; }");
  }
  std::string HostileTarget() const { return "\"$(cat " + Quote(tmp / "hostile") + ")\""; }
  // "layer N sha256:" and the first 12 hex digits of layer N's digest.
  std::string LayerLine(int n) const {
    return "layer " + std::to_string(n) + " " + written.layers.at(n).digest.substr(0, 19);
  }
};

// `dot` renders `graph` as SVG; each node and edge of the SVG as a line "CLASS | TEXT / TEXT |
// STROKE,STROKE" (Python's XML parser reads it back, entities decoded).
std::vector<std::string> RenderDot(const TempDir& tmp, const std::string& graph) {
  WriteFile(tmp / "chain.dot", graph);
  CommandResult dot =
      Run("dot -Tsvg " + Quote(tmp / "chain.dot") + " -o " + Quote(tmp / "chain.svg"));
  INFO(graph);
  REQUIRE(dot.status == 0);
  CHECK(dot.output == "");  // no syntax error, no warning
  const std::string read_svg = R"~(
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
for g in ET.parse(sys.argv[1]).iter(ns + "g"):
    cls = g.get("class", "")
    if cls.split(" ")[0] in ("node", "edge"):
        texts = [t.text or "" for t in g.iter(ns + "text")]
        strokes = [e.get("stroke") for e in g if e.get("stroke")]
        print(cls + " | " + " / ".join(texts) + " | " + ",".join(strokes))
)~";
  WriteFile(tmp / "read_svg.py", read_svg);
  CommandResult svg = Run("python3 " + Quote(tmp / "read_svg.py") + " " + Quote(tmp / "chain.svg"));
  REQUIRE(svg.status == 0);
  std::vector<std::string> lines;
  std::istringstream in(svg.output);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

size_t CountWith(const std::vector<std::string>& lines, const std::string& prefix) {
  return std::count_if(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
}

bool Has(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

}  // namespace

TEST_CASE("why --format dot: Graphviz draws the chain, the failing edges red", "[cli][why]") {
  if (!HaveProgram("dot")) return Skip("graphviz (dot) not installed: scripts/deps.sh");
  ChainImage img;
  CommandResult miss = img.Why("libcudnn.so.9", "dot");
  CHECK(miss.status == 1);  // as the text's: a consumer does not find it
  std::vector<std::string> svg = RenderDot(img.tmp, miss.output);
  std::ostringstream all;
  for (const std::string& l : svg) all << l << "\n";
  INFO(all.str());
  CHECK(Has(svg, "node consumer | /app/libapp.so / library / " + img.LayerLine(1) + " | black"));
  CHECK(Has(svg, "node name | libcudnn.so.9 | black"));
  // gray40 is #666666 in the SVG.
  CHECK(Has(svg, "node tried | /opt/nv/libcudnn.so.9 / missing | #666666"));
  CHECK(Has(svg, "node failure | not found | red"));
  // The request and the verdict fail; the candidates passed over are grey and dashed.
  CHECK(CountWith(svg, "edge failing |") == 2);
  CHECK(Has(svg, "edge failing | DT_NEEDED | red,red"));
  CHECK(CountWith(svg, "edge | ") >= 3);
  CHECK(Has(svg, "edge | 2. runpath \"/opt/nv\" | #666666,#666666"));

  CommandResult hit = img.Why("libcudart.so.12", "dot");
  CHECK(hit.status == 0);
  svg = RenderDot(img.tmp, hit.output);
  CHECK(Has(svg, "node file | /usr/lib64/libcudart.so.12 / " + img.LayerLine(0) + " | darkgreen"));
  CHECK(CountWith(svg, "node consumer |") == 2);  // both link it
  CHECK(CountWith(svg, "edge failing") == 0);
  CHECK(CountWith(svg, "node failure") == 0);
}

TEST_CASE("why --format mermaid and json: the same chain", "[cli][why]") {
  ChainImage img;
  CommandResult mermaid = img.Why("libcudnn.so.9", "mermaid");
  INFO(mermaid.output);
  CHECK(mermaid.status == 1);
  CHECK(mermaid.output.rfind("flowchart LR\n", 0) == 0);
  CHECK_THAT(mermaid.output,
             Contains("[\"/app/libapp.so<br>library<br>" + img.LayerLine(1) + "\"]:::consumer\n"));
  CHECK_THAT(mermaid.output, Contains("([\"libcudnn.so.9\"]):::name\n"));
  CHECK_THAT(mermaid.output, Contains("[\"not found\"]:::failure\n"));
  CHECK_THAT(mermaid.output, Contains(" ==>|\"DT_NEEDED\"| "));
  CHECK_THAT(mermaid.output, Contains("-.->|\"2. runpath #quot;/opt/nv#quot;\"| "));
  CHECK(std::regex_search(mermaid.output, std::regex("\n  linkStyle [0-9]+,[0-9]+ stroke:#d00")));
  CommandResult hit = img.Why("libcudart.so.12", "mermaid");
  CHECK(hit.status == 0);
  CHECK(hit.output.find("linkStyle") == std::string::npos);

  CommandResult json = img.Why("libcudnn.so.9", "json");
  INFO(json.output);
  CHECK(json.status == 1);
  auto j = nlohmann::json::parse(json.output);
  CHECK(j["target"] == "libcudnn.so.9");
  REQUIRE(j["resolutions"].size() == 1);
  const auto& r = j["resolutions"][0];
  CHECK(r["status"] == "not-found");
  CHECK(r["kind"] == "DT_NEEDED");
  CHECK(r["consumer"]["path"] == "/app/libapp.so");
  CHECK(r["consumer"]["layer"]["index"] == 1);
  CHECK(r["consumer"]["layer"]["created_by"] == "COPY app /app");
  CHECK(r["layer"].is_null());
  CHECK(r["tried"][0]["phase"] == "runpath");
  CHECK(r["tried"][0]["entry"] == "/opt/nv");
  auto found = nlohmann::json::parse(img.Why("libcudart.so.12", "json").output);
  CHECK(found["resolutions"][0]["layer"]["digest"] == img.written.layers[0].digest);

  CommandResult refused = img.Why("libcudnn.so.9", "xml");
  CHECK(refused.status == 2);
  CHECK_THAT(ReadFile(img.tmp / "stderr"),
             Contains("unknown format 'xml' (text|json|dot|mermaid)"));
}

TEST_CASE("why --format dot|mermaid: a hostile name stays inside its labels", "[cli][why]") {
  ChainImage img;
  CommandResult mermaid = img.Why(img.HostileTarget(), "mermaid");
  INFO(mermaid.output);
  CHECK(mermaid.status == 1);
  std::regex statement(
      R"~((flowchart LR|  n\d+(\["[^"%`<>&]*"\]|\(\["[^"%`<>&]*"\]\)):::[a-z]+|)~"
      R"~(  n\d+ (-->|-\.->|==>)\|"[^"%`<>&|]*"\| n\d+|  classDef [a-z]+ [-a-z0-9:#, ]+|)~"
      R"~(  linkStyle [0-9,]+ stroke:#d00,stroke-width:3px))~");
  std::istringstream lines(std::regex_replace(mermaid.output, std::regex("<br>"), ""));
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    INFO(line);
    CHECK(std::regex_match(line, statement));
  }
  CHECK(count > 5);
  CHECK_THAT(mermaid.output,
             Contains("([\"lib#quot;x\\\\]--#62;#37;#37;{init: {'theme':'dark'}}#37;#37;\\x0A"
                      "#96;#96;#96;\xc3\xa9.so\"]):::name"));

  if (!HaveProgram("dot")) return Skip("graphviz (dot) not installed: scripts/deps.sh");
  CommandResult dot = img.Why(img.HostileTarget(), "dot");
  CHECK(dot.status == 1);
  std::vector<std::string> svg = RenderDot(img.tmp, dot.output);
  std::ostringstream all;
  for (const std::string& l : svg) all << l << "\n";
  INFO(all.str());
  // The name as `why` shows it (a backslash doubled, the newline \x0A), one label, one node.
  CHECK(Has(svg,
            "node name | lib\"x\\\\]-->%%{init: {'theme':'dark'}}%%\\x0A```\xc3\xa9.so | "
            "black"));
  CHECK(CountWith(svg, "node failure | not found") == 1);
}
