// The Dockerfile an image was built from, and which of its instructions made each layer: the
// link from a finding back to the line a person edits. Parses and maps; never prints.
//
// Syntax follows the Dockerfile reference (docs.docker.com/reference/dockerfile): parser
// directives at the top (`# syntax=`, `# escape=`), comments, line continuations with the escape
// character, heredocs (`<<EOF`, `<<-EOF`, quoted delimiters) and multi-stage builds
// (`FROM ... AS name`, `FROM name`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "image/image.h"
#include "util/error.h"

namespace imgcheck::image {

struct Instruction {
  int line = 0;                   ///< first line, 1-based
  int end_line = 0;               ///< last line (continuations and heredoc bodies included)
  std::string keyword;            ///< upper case: "RUN", "ENV", "FROM", ...
  std::string args;               ///< the rest of the first line(s), continuations joined
  std::string text;               ///< keyword and args on one line, runs of blanks collapsed
  std::vector<std::string> sets;  ///< ENV and ARG: the variable names they set
};

struct Stage {
  std::string base;  ///< FROM's image, or the name of an earlier stage
  std::string name;  ///< "AS name", lower case; "" when unnamed
  int parent = -1;   ///< the earlier stage `base` names; -1 when it is an image
  std::vector<Instruction> instructions;  ///< [0] is the FROM
};

struct Dockerfile {
  std::vector<Instruction> global;  ///< ARGs before the first FROM
  std::vector<Stage> stages;
};

/// Parses Dockerfile text. Error: "line N: what" (no FROM, an instruction before FROM, an
/// unterminated heredoc).
util::Expected<Dockerfile> ParseDockerfile(std::string_view text);

/// The instruction keyword a history entry's created_by records ("RUN", "COPY", ...), as the
/// classic builder ("/bin/sh -c #(nop)  ENV X=1", "/bin/sh -c apt-get ..."), buildah (the same
/// spelling) and BuildKit ("ENV X=1", "RUN /bin/sh -c ... # buildkit") write it; "" if none.
std::string HistoryKeyword(std::string_view created_by);

/// The final stage's instructions, its parent stages' first (without their FROMs but the
/// first one's), mapped onto an image's history and layers.
struct BuildMap {
  std::vector<const Instruction*> chain;  ///< chain[0] is the FROM that names the base image
  /// Per layer (image order): the instructions that wrote it. Usually one; several when the
  /// builder squashed a stage into one layer (buildah without --layers); {FROM} for layers of
  /// the base image; empty when the history does not fit the layers.
  std::vector<std::vector<const Instruction*>> layers;
};

/// Aligns the history with the final stage, walking back from the last entry (each instruction
/// after FROM leaves one entry; the entries before the first belong to the base image).
/// `layer_count` is the image's number of layers. The map points into `dockerfile`.
BuildMap MapBuild(const Dockerfile& dockerfile, const std::vector<HistoryEntry>& history,
                  size_t layer_count);

/// The instruction a finding traces to, or nullptr: the instruction that wrote `layer` (among
/// several, the COPY/ADD whose destination holds `path`, else the last that changes files);
/// when that is only the base image's FROM and `env` names a variable, the last ENV or ARG of
/// the chain that set it; else the FROM.
const Instruction* Locate(const BuildMap& map, int layer, std::string_view path,
                          std::string_view env);

}  // namespace imgcheck::image
