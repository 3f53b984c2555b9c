// The load chain's graph from hand-made resolutions: its nodes and edges, DOT and Mermaid byte for
// byte, and names that try to break out of a label in either.
#include "report/graph.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <regex>
#include <sstream>

#include "report/escape.h"

namespace imgcheck::report {
namespace {

using loader::Attempt;
using loader::Outcome;
using loader::Reason;
using loader::Resolution;

Resolution Hit() {
  Resolution r;
  r.consumer = "/app/a.so";
  r.name = "libcudnn.so.9";
  r.status = loader::Status::kFound;
  r.reason = Reason::kRpath;
  r.path = "/app/../nv/libcudnn.so.9";
  r.real_path = "/nv/libcudnn.so.9.1.0";
  r.entry = "$ORIGIN/../nv";
  r.rpath_owner = "/app/a.so";
  r.tried = {{Reason::kRpath, "/x86", "/x86/libcudnn.so.9", Outcome::kWrongClass},
             {Reason::kRpath, "$ORIGIN/../nv", r.path, Outcome::kFound}};
  return r;
}

Resolution Miss(std::string consumer, std::string name) {
  Resolution r;
  r.consumer = std::move(consumer);
  r.name = std::move(name);
  r.kind = loader::Kind::kDlopen;
  r.tried = {{Reason::kRunpath, "/none", "/none/" + r.name, Outcome::kMissing},
             {Reason::kLdCache, "/etc/ld.so.cache", "", Outcome::kMissing}};
  return r;
}

rules::LayerRef Layers(std::string_view path) {
  rules::LayerRef ref;
  if (path == "/app/a.so") ref = {2, "sha256:0123456789abcdef0123", "COPY a.so /app/"};
  if (path == "/nv/libcudnn.so.9.1.0") ref = {3, "sha256:fedcba9876543210fedc", "COPY nv /nv"};
  return ref;
}

TEST_CASE("graph: a hit and a miss, the miss's edges failing", "[report][graph]") {
  std::vector<loader::WhyEntry> entries = {
      {Hit(), {{"/app/a.so", "framework x"}}},
      {Miss("/app/b.so", "libcudnn.so.9"), {{"/app/b.so", ""}, {"/app/main", "executable"}}}};
  Chain chain = BuildChain(entries, Layers);
  REQUIRE(chain.nodes.size() == 10);
  auto node = [&](size_t i) { return std::make_pair(chain.nodes[i].kind, chain.nodes[i].lines); };
  using K = ChainNodeKind;
  using Lines = std::vector<std::string>;
  CHECK(node(0) == std::make_pair(K::kConsumer, Lines{"/app/a.so", "framework x",
                                                      "layer 2 sha256:0123456789ab"}));
  CHECK(chain.nodes[0].layer.created_by == "COPY a.so /app/");
  CHECK(node(1) == std::make_pair(K::kName, Lines{"libcudnn.so.9"}));
  CHECK(node(2) == std::make_pair(K::kTried, Lines{"/x86/libcudnn.so.9", "wrong-class"}));
  CHECK(node(3) ==
        std::make_pair(K::kFile, Lines{"/nv/libcudnn.so.9.1.0", "layer 3 sha256:fedcba987654"}));
  CHECK(node(4) == std::make_pair(K::kConsumer, Lines{"/app/b.so"}));  // no layer: none shown
  CHECK(node(5) == std::make_pair(K::kConsumer, Lines{"/app/main", "executable"}));
  CHECK(node(6) == std::make_pair(K::kName, Lines{"libcudnn.so.9"}));  // b's own request
  CHECK(node(7) == std::make_pair(K::kTried, Lines{"/none/libcudnn.so.9", "missing"}));
  CHECK(node(8) == std::make_pair(K::kTried, Lines{"(no entry for libcudnn.so.9)", "missing"}));
  CHECK(node(9) == std::make_pair(K::kFailure, Lines{"not found"}));
  REQUIRE(chain.edges.size() == 8);
  std::ostringstream edges;
  for (const ChainEdge& e : chain.edges) {
    edges << e.from << ">" << e.to << (e.failing ? " failing" : "");
    for (const std::string& l : e.lines) edges << " | " << l;
    edges << "\n";
  }
  CHECK(edges.str() ==
        "0>1 | DT_NEEDED\n"
        "1>2 | 1. rpath \"/x86\"\n"
        "1>3 | 2. rpath \"$ORIGIN/../nv\" | opened as /app/../nv/libcudnn.so.9\n"
        "5>4 | link map\n"
        "4>6 failing | dlopen\n"
        "6>7 | 1. runpath \"/none\"\n"
        "6>8 | 2. ld.so.cache\n"
        "6>9 failing | 2 tried\n");
}

TEST_CASE("graph: DOT and Mermaid of a miss, byte for byte", "[report][graph]") {
  Chain chain = BuildChain({{Miss("/app/b.so", "libx.so"), {{"/app/b.so", ""}}}});
  CHECK(DotChain(chain, "imgcheck why libx.so") ==
        "digraph \"imgcheck why\" {\n"
        "  label=\"imgcheck why libx.so\";\n"
        "  labelloc=t;\n"
        "  rankdir=LR;\n"
        "  n0 [label=\"/app/b.so\", class=\"consumer\", shape=box];\n"
        "  n1 [label=\"libx.so\", class=\"name\", shape=ellipse];\n"
        "  n2 [label=\"/none/libx.so\\nmissing\", class=\"tried\", shape=box, style=dashed, "
        "color=gray40, fontcolor=gray40];\n"
        "  n3 [label=\"(no entry for libx.so)\\nmissing\", class=\"tried\", shape=box, "
        "style=dashed, color=gray40, fontcolor=gray40];\n"
        "  n4 [label=\"not found\", class=\"failure\", shape=octagon, style=bold, color=red, "
        "fontcolor=red];\n"
        "  n0 -> n1 [label=\"dlopen\", class=\"failing\", color=red, fontcolor=red, penwidth=2, "
        "style=bold];\n"
        "  n1 -> n2 [label=\"1. runpath \\\"/none\\\"\", style=dashed, color=gray40, "
        "fontcolor=gray40];\n"
        "  n1 -> n3 [label=\"2. ld.so.cache\", style=dashed, color=gray40, fontcolor=gray40];\n"
        "  n1 -> n4 [label=\"2 tried\", class=\"failing\", color=red, fontcolor=red, penwidth=2, "
        "style=bold];\n"
        "}\n");
  CHECK(MermaidChain(chain) ==
        "flowchart LR\n"
        "  n0[\"/app/b.so\"]:::consumer\n"
        "  n1([\"libx.so\"]):::name\n"
        "  n2[\"/none/libx.so<br>missing\"]:::tried\n"
        "  n3[\"(no entry for libx.so)<br>missing\"]:::tried\n"
        "  n4[\"not found\"]:::failure\n"
        "  n0 ==>|\"dlopen\"| n1\n"
        "  n1 -.->|\"1. runpath #quot;/none#quot;\"| n2\n"
        "  n1 -.->|\"2. ld.so.cache\"| n3\n"
        "  n1 ==>|\"2 tried\"| n4\n"
        "  classDef consumer stroke-width:2px\n"
        "  classDef name fill:#eef\n"
        "  classDef tried stroke-dasharray:4 3,color:#666\n"
        "  classDef file stroke:#060,stroke-width:2px\n"
        "  classDef failure stroke:#d00,color:#d00,stroke-width:2px\n"
        "  linkStyle 0,3 stroke:#d00,stroke-width:3px\n");
}

TEST_CASE("graph: a hit has no failing edge and no linkStyle", "[report][graph]") {
  Chain chain = BuildChain({{Hit(), {{"/app/a.so", ""}}}}, Layers);
  for (const ChainEdge& e : chain.edges) CHECK_FALSE(e.failing);
  std::string dot = DotChain(chain, "t");
  CHECK(dot.find("failing") == std::string::npos);
  CHECK(dot.find("class=\"file\"") != std::string::npos);
  std::string mermaid = MermaidChain(chain);
  CHECK(mermaid.find("==>") == std::string::npos);
  CHECK(mermaid.find("linkStyle") == std::string::npos);
  // One resolution (a finding's evidence) draws as the chain of that resolution alone.
  CHECK(MermaidChain(Hit(), Layers) == mermaid);
}

// What a reader of the DOT label gets back: \" and \\ unescaped, \n a new line.
std::string DotDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      ++i;
      out += s[i] == 'n' ? '\n' : s[i];
    } else {
      out += s[i];
    }
  }
  return out;
}

// What Mermaid shows of a label: #quot; and #NN; entity codes decoded, <br> a new line.
std::string MermaidDecode(std::string s) {
  s = std::regex_replace(s, std::regex("<br>"), "\n");
  std::string out;
  std::smatch m;
  static const std::regex kEntity("^#(quot|[0-9]+);");
  for (size_t i = 0; i < s.size(); ++i) {
    std::string rest = s.substr(i);
    if (std::regex_search(rest, m, kEntity)) {
      out += m[1] == "quot" ? '"' : static_cast<char>(std::stoi(m[1].str()));
      i += m.length(0) - 1;
    } else {
      out += s[i];
    }
  }
  return out;
}

TEST_CASE("graph: hostile names stay inside their labels", "[report][graph]") {
  const std::string evil =
      "lib\"x\\y\n]-->%%{init: {'theme':'dark'}}%%<img src=x onerror=alert(1)>&amp;"
      "\n```\n#quot; \xff \xc3\xa9 \u2192.so";
  Resolution r = Miss("/app/\"]; n9 [label=\"x", evil);
  r.consumer = "/app/\"]; n9 [label=\"x\\";
  Chain chain = BuildChain({{r, {{r.consumer, "role\"\n"}}}});
  std::string dot = DotChain(chain, evil);
  std::string mermaid = MermaidChain(chain);
  INFO(dot);
  INFO(mermaid);
  // Every line is a statement of the form drawn: the label (one quoted string) cannot end early.
  std::regex dot_line(
      R"((digraph "imgcheck why" \{|  label="(?:[^"\\\n]|\\.)*";|  labelloc=t;|  rankdir=LR;|)"
      R"(  n\d+ (-> n\d+ )?\[label="(?:[^"\\\n]|\\.)*"(, [a-z]+=("[a-z]+"|[a-z0-9]+))*\];|\}))");
  std::istringstream dot_lines(dot);
  std::vector<std::string> dot_labels;
  for (std::string line; std::getline(dot_lines, line);) {
    CHECK(std::regex_match(line, dot_line));
    if (size_t at = line.find("label=\""); at != std::string::npos) {
      std::smatch m;
      std::string rest = line.substr(at + 7);
      REQUIRE(std::regex_search(rest, m, std::regex(R"~(^((?:[^"\\]|\\.)*)")~")));
      dot_labels.push_back(DotDecode(m[1]));
    }
  }
  std::regex mermaid_line(
      R"((flowchart LR|  n\d+(\["[^"%`<>&]*"\]|\(\["[^"%`<>&]*"\]\)):::[a-z]+|)"
      R"(  n\d+ (-->|-\.->|==>)\|"[^"%`<>&]*"\| n\d+|  classDef .*|  linkStyle [0-9,]+ .*))");
  std::istringstream mermaid_lines(std::regex_replace(mermaid, std::regex("<br>"), "\x01"));
  std::vector<std::string> mermaid_labels;
  for (std::string line; std::getline(mermaid_lines, line);) {
    CHECK(std::regex_match(line, mermaid_line));
    std::smatch m;
    if (std::regex_search(line, m, std::regex(R"~("([^"]*)")~")))
      mermaid_labels.push_back(
          MermaidDecode(std::regex_replace(m[1].str(), std::regex("\x01"), "<br>")));
  }
  // Each label reads back as the name shown safely (report::Visible): nothing lost or added.
  const std::string consumer_label = Visible(r.consumer) + "\n" + Visible("role\"\n");
  const std::string name_label = Visible(evil);
  CHECK(dot_labels.size() == 1 + chain.nodes.size() + chain.edges.size());
  CHECK(dot_labels[0] == name_label);  // the title
  CHECK(dot_labels[1] == consumer_label);
  CHECK(dot_labels[2] == name_label);
  CHECK(mermaid_labels.size() == chain.nodes.size() + chain.edges.size());
  CHECK(mermaid_labels[0] == consumer_label);
  CHECK(mermaid_labels[1] == name_label);
  CHECK(mermaid_labels[2] == Visible("/none/" + evil) + "\nmissing");
  // Nothing Mermaid's directives, its Markdown strings or HTML read is left raw.
  CHECK(mermaid.find('%') == std::string::npos);
  CHECK(mermaid.find('`') == std::string::npos);
  CHECK(mermaid.find('&') == std::string::npos);
  CHECK(std::count(mermaid.begin(), mermaid.end(), '<') ==
        static_cast<long>(mermaid.size() -
                          std::regex_replace(mermaid, std::regex("<br>"), "").size()) /
            4);
}

}  // namespace
}  // namespace imgcheck::report
