#!/usr/bin/env python3
"""The GitHub Action's scan step, run as the runner would run it, with a `docker` that records.

    tests/action_check.py SOURCE_DIR        (ctest runs it: action_scan_step)

Takes the `Scan` step of action.yml, fills in its `${{ ... }}` expressions as GitHub would for
each case's inputs, and runs its script with bash, a `docker` first on PATH that writes down its
arguments (and, while it runs, the mounted key file's mode and bytes) and exits with a chosen
status. Checks what the step hands to `docker run` and what it leaves behind: attest's key in a
private file mounted read-only and removed after, the refusals that need no docker at all, and
the exit code passed through. actionlint and the schema check (scripts/validate-release) check
the file's form; this checks what the script does.
"""
import json
import os
import re
import stat
import subprocess
import sys
import tempfile

import yaml

source = sys.argv[1]
action = yaml.safe_load(open(os.path.join(source, "action.yml")))
step = next(s for s in action["runs"]["steps"] if s.get("id") == "scan")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


DOCKER = r"""#!/bin/sh
# Records its arguments, NUL-separated, and the mounted key file while it runs.
printf '%s\0' "$@" > "$RECORD/argv"
for a in "$@"; do
  case "$a" in
    *:/run/imgcheck-key:ro)
      dir=${a%%:/run/imgcheck-key:ro}
      stat -c %a "$dir/key.pem" > "$RECORD/key-mode"
      cat "$dir/key.pem" > "$RECORD/key-bytes" ;;
  esac
done
exit "${DOCKER_STATUS:-0}"
"""


def run(inputs, docker_status=0):
    """Runs the step with `inputs` (the action's defaults for the rest)."""
    values = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    values.update(inputs)
    tmp = tempfile.mkdtemp()
    work, runner, record, shim = (os.path.join(tmp, d) for d in ("work", "runner", "record", "bin"))
    for d in (work, runner, record, shim):
        os.makedirs(d)
    with open(os.path.join(shim, "docker"), "w") as f:
        f.write(DOCKER)
    os.chmod(os.path.join(shim, "docker"), 0o755)

    def fill(text):
        text = re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: values[m.group(1)], text)
        return re.sub(r"\$\{\{\s*steps\.image\.outputs\.ref\s*\}\}", "imgcheck:test", text)

    env = {k: fill(str(v)) for k, v in step["env"].items()}
    env.update(PATH=shim + ":" + os.environ["PATH"], HOME=tmp, GITHUB_WORKSPACE=work,
               RUNNER_TEMP=runner, GITHUB_OUTPUT=os.path.join(tmp, "output"), RECORD=record,
               DOCKER_STATUS=str(docker_status))
    r = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=work, env=env, capture_output=True,
                       text=True, timeout=60)
    out = {"status": r.returncode, "stderr": r.stderr, "runner": runner, "argv": None}
    if os.path.exists(os.path.join(record, "argv")):
        out["argv"] = open(os.path.join(record, "argv")).read().split("\0")[:-1]
    for name in ("key-mode", "key-bytes"):
        p = os.path.join(record, name)
        out[name] = open(p).read() if os.path.exists(p) else None
    p = env["GITHUB_OUTPUT"]
    out["outputs"] = dict(l.split("=", 1) for l in open(p).read().split()) if os.path.exists(p) else {}
    return out


KEY = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----"

# attest: the key in a private file, mounted read-only, --attest --key at the mount, removed
# after; imgcheck's status (1: findings) is the step's.
r = run({"image": "docker://registry.example.com/app:1", "attest": "true", "attest-key": KEY},
        docker_status=1)
argv = r["argv"] or []
check(r["status"] == 1, f"attest: step status {r['status']}, not docker's 1: {r['stderr']}")
check(r["outputs"].get("exit-code") == "1", f"attest: exit-code output {r['outputs']}")
check(argv[:2] == ["run", "--rm"], f"attest: docker argv {argv[:4]}")
check("imgcheck:test" in argv and argv[argv.index("imgcheck:test") + 1:][:2] ==
      ["scan", "docker://registry.example.com/app:1"], f"attest: scan arguments {argv}")
check(argv[-3:] == ["--attest", "--key", "/run/imgcheck-key/key.pem"],
      f"attest: the last arguments {argv[-3:]}")
mounts = [argv[i + 1] for i, a in enumerate(argv) if a == "-v" and argv[i + 1].endswith(":/run/imgcheck-key:ro")]
check(len(mounts) == 1 and mounts[0].startswith(r["runner"] + "/imgcheck-key."),
      f"attest: the key's mount {mounts}")
check(r["key-mode"] == "600\n", f"attest: the key file's mode {r['key-mode']!r}")
check(r["key-bytes"] == KEY + "\n", "attest: the key file's bytes differ from the secret's")
check(os.listdir(r["runner"]) == [], f"attest: left in runner.temp: {os.listdir(r['runner'])}")
check(KEY.splitlines()[1] not in r["stderr"], "attest: the key shows in the step's output")

# Not asked: no key, no --attest.
r = run({"image": "docker://registry.example.com/app:1", "attest-key": KEY})
argv = r["argv"] or []
check(r["status"] == 0 and "--attest" not in argv and not any("imgcheck-key" in a for a in argv),
      f"no attest: argv {argv}")

# Refused before any docker: an image with no registry to attach to, no key.
for inputs, words in (({"image": "docker-daemon:app:1", "attest": "true", "attest-key": KEY},
                       "needs a docker:// image"),
                      ({"image": "docker://registry.example.com/app:1", "attest": "true"},
                       "needs attest-key")):
    r = run(inputs)
    check(r["status"] == 2 and words in r["stderr"] and r["argv"] is None,
          f"{inputs['image']}: status {r['status']}, docker ran: {r['argv'] is not None}, "
          f"stderr {r['stderr']!r}")
    check(os.listdir(r["runner"]) == [], f"{inputs['image']}: left in runner.temp")

for f in failures:
    print("action: " + f)
print(f"action: {len(failures)} problem(s)" if failures else "action: the scan step does what it says")
sys.exit(1 if failures else 0)
