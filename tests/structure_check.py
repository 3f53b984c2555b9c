#!/usr/bin/env python3
"""The shape STYLE.md promises, checked on the tree: no stage reaches back up the pipeline.

    tests/structure_check.py SOURCE_DIR            (ctest runs it: structure)

1. Every `#include "STAGE/..."` in src/ names the file's own stage or an earlier one, in the order
   of STYLE.md's "Shape" (util, image, elf, catalog, loader, rules, report, scan, attest, probe,
   serve, cli).
2. src/serve's rooms (its sub-folders: front, fleet, trust) see each other through one header
   each, named after the room (serve/fleet/fleet.h): a file outside a room includes nothing else
   of it, and at serve's top level only the composition (server.h, server.cpp) includes a room
   at all; the rest there (verdict, metrics, log, pool) is what every room speaks. No room
   includes the composition, and a room's code is in its own namespace (serve::fleet).
3. src/cli holds argument parsing and output selection only: it names nothing of `loader::` or
   `catalog::` (scan:: is its door to them), and no function body in it runs past 60 lines.

Function bodies are found by brace matching on the source with comments and literals blanked: a
`{` whose opening text (since the last `;`, `{` or `}`) has a `(` and no `=` before it, at
namespace or class scope. Enough for clang-formatted code; a miss makes the check weaker, never
wrong about a body it reports.
"""
import os
import re
import sys

STAGES = ["util", "image", "elf", "catalog", "loader", "rules", "report", "scan", "attest", "probe",
          "serve", "cli"]
MAX_BODY_LINES = 60


def blank_comments_and_literals(text):
    """The text with comments, string and char literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000 separators
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_bodies(text):
    """(name, first line, line count) of each function body at namespace or class scope."""
    code = blank_comments_and_literals(text)
    code = re.sub(r"^[ \t]*#.*$", lambda m: " " * len(m.group(0)), code, flags=re.M)  # directives
    stack = []  # kind of each open brace: "scope", "function" or "other"
    header_start = 0
    bodies = []
    for i, c in enumerate(code):
        if c == "{":
            header = code[header_start:i]
            flat = " ".join(header.split())
            flat = re.sub(r"^template\s*<.*?>\s*", "", flat)
            if re.match(r"(namespace|class|struct|enum|union)\b|extern\s", flat):
                kind = "scope"
            elif all(k == "scope" for k, _ in stack) and "(" in flat and "=" not in flat.split("(")[0]:
                kind = "function"
                m = re.search(r"([\w:~]+)\s*\(", flat)
                bodies.append([m.group(1) if m else flat[:40], code.count("\n", 0, i) + 1, None])
            else:
                kind = "other"
            stack.append((kind, len(bodies) - 1))
            header_start = i + 1
        elif c == "}":
            if stack:
                kind, index = stack.pop()
                if kind == "function":
                    bodies[index][2] = code.count("\n", 0, i) + 1 - bodies[index][1] + 1
            header_start = i + 1
        elif c == ";":
            header_start = i + 1
    return [(name, line, count) for name, line, count in bodies if count is not None]


SERVE_COMPOSITION = {"server.h", "server.cpp"}


def room_problems(src, rel, text):
    """Includes of `rel` (a file under src/) that reach into a room of src/serve past its header."""
    serve = os.path.join(src, "serve")
    rooms = {d for d in os.listdir(serve) if os.path.isdir(os.path.join(serve, d))}
    parts = rel.split(os.sep)[1:]  # below src/
    own = parts[1] if parts[0] == "serve" and len(parts) == 3 else None
    top_level = parts[0] == "serve" and len(parts) == 2
    problems = []
    if own:
        for m in re.finditer(r"^namespace imgcheck::serve(::\w+)?\s*\{", text, re.M):
            if m.group(1) != "::" + own:
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: room {own}'s code is in namespace "
                                f"imgcheck::serve::{own}")
    for m in re.finditer(r'^\s*#\s*include\s+"serve/([^"]+)"', text, re.M):
        line = text.count("\n", 0, m.start()) + 1
        target = m.group(1).split("/")
        if len(target) == 1:
            if own and target[0] in SERVE_COMPOSITION:
                problems.append(f"{rel}:{line}: room {own} includes serve/{target[0]}, the "
                                f"composition above it")
            continue
        room = target[0]
        if room not in rooms or room == own:
            continue
        if top_level and parts[1] not in SERVE_COMPOSITION:
            problems.append(f"{rel}:{line}: serve/{parts[1]} includes room {room}: only the "
                            f"composition (server.h, server.cpp) does")
        elif target[1:] != [room + ".h"]:
            problems.append(f"{rel}:{line}: includes serve/{m.group(1)}: room {room} is seen "
                            f"through serve/{room}/{room}.h only")
    return problems


def main():
    source = sys.argv[1]
    src = os.path.join(source, "src")
    problems = []
    include = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)
    for stage in STAGES:
        folder = os.path.join(src, stage)
        for root, _, files in os.walk(folder):
            for name in sorted(files):
                if not name.endswith((".cpp", ".h", ".cc", ".c")):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, source)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                for m in include.finditer(text):
                    to = m.group(1)
                    if to in STAGES and STAGES.index(to) > STAGES.index(stage):
                        line = text.count("\n", 0, m.start()) + 1
                        problems.append(f"{rel}:{line}: {stage} includes {to}/, a later stage")
                problems += room_problems(src, rel, text)
                if stage != "cli" or name.endswith("_test.cpp"):
                    continue
                code = blank_comments_and_literals(text)
                for m in re.finditer(r"\b(loader|catalog)::", code):
                    line = code.count("\n", 0, m.start()) + 1
                    problems.append(f"{rel}:{line}: cli names {m.group(1)}:: (go through scan::)")
                for fn, line, count in function_bodies(text):
                    if count > MAX_BODY_LINES:
                        problems.append(f"{rel}:{line}: {fn} is {count} lines long "
                                        f"(at most {MAX_BODY_LINES} in src/cli)")
    for p in problems:
        print(p)
    if problems:
        print(f"structure: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("structure: includes point down the pipeline; serve's rooms meet through one header "
          "each; src/cli is argument parsing and output")
    return 0


if __name__ == "__main__":
    sys.exit(main())
