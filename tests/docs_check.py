#!/usr/bin/env python3
"""Every command the docs show still exists: no doc goes stale silently.

    tests/docs_check.py IMGCHECK SOURCE_DIR        (ctest runs it: docs_commands)

Reads the code blocks (``` fenced) of README.md, CONTRIBUTING.md and docs/*.md. Each line that
runs imgcheck (`imgcheck ...`, `build/imgcheck ...`, after `$ ` or in a pipe) must name a
subcommand the binary has (or be an image, the default `scan`), and every --flag on it must be one
that subcommand's --help lists. Each `scripts/NAME` or `.ci/run` must be an executable file of the
tree. What the check cannot know (IMAGE placeholders, values) it leaves alone: it checks the
words a user types, which are what go stale when code changes.
"""
import os
import re
import subprocess
import sys

imgcheck, source = sys.argv[1], sys.argv[2]
docs = [os.path.join(source, n) for n in ("README.md", "CONTRIBUTING.md")]
docs_dir = os.path.join(source, "docs")
if os.path.isdir(docs_dir):
    docs += sorted(os.path.join(docs_dir, n) for n in os.listdir(docs_dir) if n.endswith(".md"))
docs = [d for d in docs if os.path.exists(d)]

help_cache = {}


def help_text(sub):
    if sub not in help_cache:
        args = [imgcheck, "help"] + ([sub] if sub else [])
        r = subprocess.run(args, capture_output=True, text=True, timeout=30)
        help_cache[sub] = r.stdout if r.returncode == 0 else None
    return help_cache[sub]


def nested_help(sub, nested):
    key = sub + " " + nested
    if key not in help_cache:
        r = subprocess.run([imgcheck, sub, nested, "--help"], capture_output=True, text=True,
                           timeout=30)
        help_cache[key] = r.stdout if r.returncode == 0 else None
    return help_cache[key]


top = help_text("")
subcommands = set()
if top:
    listed = re.split(r"(?i)^subcommands:", top, flags=re.M)[-1]
    subcommands = set(re.findall(r"^\s{2}(\w[\w-]*)\s", listed, re.M))
if not subcommands:
    sys.exit(f"docs_check: `{imgcheck} help` lists no subcommands")

errors, checked = [], 0


def check_imgcheck(words, where):
    global checked
    if not words:
        return
    sub = words[0] if words[0] in subcommands else "scan"
    if words[0].startswith("-") and words[0] in ("--help", "-h", "--version"):
        return
    text = help_text(sub)
    if text is None:
        errors.append(f"{where}: `imgcheck help {sub}` fails")
        return
    # A subcommand with subcommands of its own (rules list|explain): the next word is one.
    m = re.split(r"(?i)^subcommands:", text, flags=re.M)
    if sub == words[0] and len(m) > 1:
        nested = set(re.findall(r"^\s{2}(\w[\w-]*)\s", m[-1], re.M))
        if len(words) < 2 or words[1] not in nested:
            errors.append(f"{where}: imgcheck {sub}: no subcommand {words[1:2]}")
        else:  # its flags are its own (rules push --key) or its parent's (rules --rules-cache)
            text += nested_help(sub, words[1]) or ""
    for w in words:
        if w.startswith("--") and len(w) > 2:
            flag = w.split("=", 1)[0]
            if not re.search(re.escape(flag) + r"\b", text):
                errors.append(f"{where}: imgcheck {sub}: no flag {flag}")
    checked += 1


for path in docs:
    rel = os.path.relpath(path, source)
    in_block = False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            continue
        code = line.split("#", 1)[0] if " #" in line or line.lstrip().startswith("#") else line
        code = code.strip().removeprefix("$ ").removeprefix("sudo ")
        where = f"{rel}:{n}"
        for part in re.split(r"\s*(?:\||&&|;)\s*", code):
            words = part.split()
            if not words:
                continue
            cmd = words[0]
            if cmd in ("imgcheck", "build/imgcheck", "./imgcheck") or cmd.endswith("/bin/imgcheck"):
                check_imgcheck(words[1:], where)
            elif re.fullmatch(r"(\./)?(scripts/[\w.-]+|\.ci/run)", cmd):
                f = os.path.join(source, cmd.removeprefix("./"))
                if not (os.path.isfile(f) and os.access(f, os.X_OK)):
                    errors.append(f"{where}: {cmd} is not an executable file of the tree")
                checked += 1

for e in errors:
    print(e)
print(f"docs_check: {checked} command lines in {len(docs)} files, {len(errors)} stale")
sys.exit(1 if errors else 0)
