#include "image/dockerfile.h"

#include <catch2/catch.hpp>

using namespace imgcheck::image;

namespace {

Dockerfile Parse(std::string_view text) {
  auto df = ParseDockerfile(text);
  REQUIRE(df);
  return *df;
}

std::vector<HistoryEntry> History(const std::vector<std::pair<std::string, bool>>& entries) {
  std::vector<HistoryEntry> out;
  out.reserve(entries.size());
  for (const auto& [created_by, empty] : entries) out.push_back({created_by, empty});
  return out;
}

}  // namespace

TEST_CASE("dockerfile: directives, comments, continuations, heredocs, stages") {
  Dockerfile df = Parse(
      "# syntax=docker/dockerfile:1\n"  // 1
      "ARG BASE=debian\n"               // 2
      "FROM $BASE AS Build\n"           // 3
      "# a comment\n"                   // 4
      "RUN apt-get update && \\\n"      // 5
      "    # dropped inside a continuation\n"
      "    apt-get install -y gcc\n"  // 7
      "COPY <<EOF /etc/x.conf\n"      // 8
      "hello \\\n"
      "EOF\n"                                               // 10
      "RUN <<-'END' bash\n\techo <<not-a-heredoc\n\tEND\n"  // 11-13
      "FROM build\n"                                        // 14
      "ENV A=1 \\\n"                                        // 15
      "    LD_LIBRARY_PATH=\"/opt/a b\"\n"
      "ENV LEGACY value with blanks\n"  // 17
      "arg X Y=2\n");                   // 18
  REQUIRE(df.global.size() == 1);
  CHECK(df.global[0].sets == std::vector<std::string>{"BASE"});
  REQUIRE(df.stages.size() == 2);
  CHECK(df.stages[0].name == "build");
  CHECK(df.stages[0].parent == -1);
  CHECK(df.stages[1].parent == 0);
  const auto& s0 = df.stages[0].instructions;
  REQUIRE(s0.size() == 4);
  CHECK(s0[1].line == 5);
  CHECK(s0[1].end_line == 7);
  CHECK(s0[1].text == "RUN apt-get update && apt-get install -y gcc");
  CHECK(s0[2].keyword == "COPY");
  CHECK(s0[2].line == 8);
  CHECK(s0[2].end_line == 10);  // the heredoc body's escape does not continue the line
  CHECK(s0[3].line == 11);
  CHECK(s0[3].end_line == 13);
  const auto& s1 = df.stages[1].instructions;
  REQUIRE(s1.size() == 4);
  CHECK(s1[1].line == 15);
  CHECK(s1[1].sets == std::vector<std::string>{"A", "LD_LIBRARY_PATH"});
  CHECK(s1[2].sets == std::vector<std::string>{"LEGACY"});
  CHECK(s1[3].keyword == "ARG");
  CHECK(s1[3].sets == std::vector<std::string>{"X", "Y"});
}

TEST_CASE("dockerfile: the escape directive and errors") {
  Dockerfile df = Parse("# escape=`\nFROM x\nRUN dir `\n  c:\\\n");
  REQUIRE(df.stages[0].instructions.size() == 2);
  CHECK(df.stages[0].instructions[1].text == "RUN dir c:\\");
  CHECK(df.stages[0].instructions[1].end_line == 4);
  // A directive after a comment is a comment.
  df = Parse("# hello\n# escape=`\nFROM x\nRUN a \\\n b\n");
  CHECK(df.stages[0].instructions[1].text == "RUN a b");

  CHECK(ParseDockerfile("RUN x\nFROM y\n").error().message == "line 1: RUN before the first FROM");
  CHECK(ParseDockerfile("# only a comment\n").error().message == "no FROM instruction");
  CHECK(ParseDockerfile("FROM x\nRUN <<EOF\necho\n").error().message ==
        "line 2: heredoc <<EOF is not terminated");
  CHECK(ParseDockerfile("FROM x\nFOO bar\n").error().message ==
        "line 2: unknown instruction \"FOO\"");
}

TEST_CASE("dockerfile: history keywords as each builder spells them") {
  CHECK(HistoryKeyword("/bin/sh -c #(nop)  ENV A=1") == "ENV");                     // classic
  CHECK(HistoryKeyword("/bin/sh -c #(nop) COPY dir:4b54 in /opt/lib ") == "COPY");  // buildah
  CHECK(HistoryKeyword("/bin/sh -c apt-get install x") == "RUN");
  CHECK(HistoryKeyword("|2 A=1 B=2 /bin/sh -c make") == "RUN");
  CHECK(HistoryKeyword("RUN /bin/sh -c make # buildkit") == "RUN");  // BuildKit
  CHECK(HistoryKeyword("COPY lib /opt/lib # buildkit") == "COPY");
  CHECK(HistoryKeyword("ENV PATH=/usr/bin") == "ENV");
  CHECK(HistoryKeyword("/bin/sh") == "");
  CHECK(HistoryKeyword("") == "");
}

TEST_CASE("dockerfile: layers map to instructions, one layer per instruction") {
  Dockerfile df = Parse(
      "FROM base\n"                         // 1
      "ENV LD_LIBRARY_PATH=/opt/lib\n"      // 2
      "COPY lib /opt/lib\n"                 // 3
      "ARG V=1\n"                           // 4: BuildKit records no entry
      "RUN make\n"                          // 5
      "ENV NVIDIA_REQUIRE_CUDA=cuda>=11\n"  // 6
  );
  auto history = History({{"/bin/sh -c #(nop) ADD file:aa in / ", false},
                          {"/bin/sh -c #(nop)  CMD [\"bash\"]", true},
                          {"ENV LD_LIBRARY_PATH=/opt/lib", true},
                          {"COPY lib /opt/lib # buildkit", false},
                          {"RUN |1 V=1 /bin/sh -c make # buildkit", false},
                          {"ENV NVIDIA_REQUIRE_CUDA=cuda>=11", true}});
  BuildMap map = MapBuild(df, history, 3);
  REQUIRE(map.layers.size() == 3);
  REQUIRE(map.layers[0].size() == 1);
  CHECK(map.layers[0][0]->keyword == "FROM");
  REQUIRE(map.layers[1].size() == 1);
  CHECK(map.layers[1][0]->line == 3);
  REQUIRE(map.layers[2].size() == 1);
  CHECK(map.layers[2][0]->line == 5);

  CHECK(Locate(map, 1, "/opt/lib/libcudnn.so.8", "")->line == 3);
  CHECK(Locate(map, -1, "", "LD_LIBRARY_PATH")->line == 2);
  CHECK(Locate(map, -1, "", "NVIDIA_REQUIRE_CUDA")->line == 6);
  // From the base image, with a variable the Dockerfile set: the ENV line is what to change.
  CHECK(Locate(map, 0, "/usr/local/cuda/lib64/stubs/libcuda.so", "LD_LIBRARY_PATH")->line == 2);
  CHECK(Locate(map, 0, "/usr/lib/x.so", "")->line == 1);
  // Set by the base image only: the FROM that brought it.
  CHECK(Locate(map, -1, "", "CUDA_VERSION")->line == 1);
  CHECK(Locate(map, -1, "", "") == nullptr);

  // A history that does not fit the layers maps no layer, but variables still map.
  BuildMap bad = MapBuild(df, history, 4);
  CHECK(bad.layers[1].empty());
  CHECK(Locate(bad, 1, "/opt/lib/x", "") == nullptr);
  CHECK(Locate(bad, -1, "", "LD_LIBRARY_PATH")->line == 2);
}

TEST_CASE("dockerfile: a stage committed as one layer (buildah without --layers)") {
  Dockerfile df = Parse(
      "FROM builder AS b\nRUN make\n"                                         // stage 0, lines 1-2
      "FROM b\nCOPY lib /opt/lib\nCOPY etc /etc/app\nENV A=1\nLABEL x=y\n");  // lines 3-7
  auto history = History({{"/bin/sh", false},
                          {"/bin/sh -c make", false},
                          {"/bin/sh -c #(nop) COPY dir:11 in /opt/lib ", true},
                          {"/bin/sh -c #(nop) COPY dir:22 in /etc/app ", true},
                          {"/bin/sh -c #(nop) ENV A=1", true},
                          {"/bin/sh -c #(nop) LABEL x=y", false}});
  BuildMap map = MapBuild(df, history, 3);
  REQUIRE(map.chain.size() == 6);  // FROM builder, RUN, COPY, COPY, ENV, LABEL
  CHECK(map.layers[0][0]->line == 1);
  CHECK(map.layers[1][0]->line == 2);
  REQUIRE(map.layers[2].size() == 3);
  CHECK(Locate(map, 2, "/opt/lib/libcudnn.so", "")->line == 4);
  CHECK(Locate(map, 2, "/etc/app/x.conf", "")->line == 5);
  CHECK(Locate(map, 2, "/usr/bin/other", "")->line == 5);  // the last that changed files
  CHECK(Locate(map, -1, "", "A")->line == 6);
}
