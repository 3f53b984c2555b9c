#!/usr/bin/env python3
"""The GitHub Action's steps, run as the runner would run them, with a `docker` that records.

    tests/action_check.py SOURCE_DIR        (ctest runs it: action_scan_step)

Takes the `Scan` step of action.yml, fills in its `${{ ... }}` expressions as GitHub would for
each case's inputs, and runs its script with bash, a `docker` first on PATH that writes down its
arguments (and, while it runs, the mounted key file's mode and bytes) and exits with a chosen
status. Checks what the step hands to `docker run` and what it leaves behind: attest's key in a
private file mounted read-only and removed after, the refusals that need no docker at all, and
the exit code passed through. The summary and comment steps then run after it against a fake
GitHub REST API on a loopback port (real curl): the Markdown appended to the job summary, one
pull-request comment posted and then edited in place, the token sent to the API only, and
nothing posted outside pull requests. actionlint and the schema check (scripts/validate-release)
check the file's form; this checks what the scripts do.
"""
import http.server
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import threading
import urllib.parse

import yaml

source = sys.argv[1]
action = yaml.safe_load(open(os.path.join(source, "action.yml")))
steps = {s.get("id"): s for s in action["runs"]["steps"]}
step = steps["scan"]
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
    markdown=*) printf '%s' "$MARKDOWN" > "${a#markdown=}" ;;
  esac
done
exit "${DOCKER_STATUS:-0}"
"""


def run(inputs, docker_status=0, after=(), github=None, markdown="# imgcheck\n"):
    """Runs the scan step with `inputs` (the action's defaults for the rest), then the steps
    `after` ("summary", "comment") with the scan's outputs, as the runner would (bash -e -o
    pipefail). `github`: more of the runner's variables (GITHUB_EVENT_NAME, ...). The `docker`
    writes `markdown` where --output markdown= says."""
    values = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    values.update(inputs)
    tmp = tempfile.mkdtemp()
    work, runner, record, shim = (os.path.join(tmp, d) for d in ("work", "runner", "record", "bin"))
    for d in (work, runner, record, shim):
        os.makedirs(d)
    with open(os.path.join(shim, "docker"), "w") as f:
        f.write(DOCKER)
    os.chmod(os.path.join(shim, "docker"), 0o755)
    scan_outputs = {}

    def fill(text):
        text = re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: values[m.group(1)], text)
        text = re.sub(r"\$\{\{\s*steps\.scan\.outputs\.([\w-]+)\s*\}\}",
                      lambda m: scan_outputs.get(m.group(1), ""), text)
        return re.sub(r"\$\{\{\s*steps\.image\.outputs\.ref\s*\}\}", "imgcheck:test", text)

    def run_step(s, output):
        env = {k: fill(str(v)) for k, v in s["env"].items()}
        env.update(PATH=shim + ":" + os.environ["PATH"], HOME=tmp, GITHUB_WORKSPACE=work,
                   RUNNER_TEMP=runner, GITHUB_OUTPUT=output, RECORD=record,
                   DOCKER_STATUS=str(docker_status), MARKDOWN=markdown,
                   GITHUB_STEP_SUMMARY=os.path.join(tmp, "summary"), **(github or {}))
        return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", s["run"]], cwd=work, env=env,
                              capture_output=True, text=True, timeout=60)

    r = run_step(step, os.path.join(tmp, "output"))
    out = {"status": r.returncode, "stderr": r.stderr, "runner": runner, "argv": None}
    if os.path.exists(os.path.join(record, "argv")):
        out["argv"] = open(os.path.join(record, "argv")).read().split("\0")[:-1]
    for name in ("key-mode", "key-bytes"):
        p = os.path.join(record, name)
        out[name] = open(p).read() if os.path.exists(p) else None
    p = os.path.join(tmp, "output")
    out["outputs"] = dict(l.split("=", 1) for l in open(p).read().split()) if os.path.exists(p) else {}
    scan_outputs.update(out["outputs"])
    for name in after:
        a = run_step(steps[name], os.path.join(tmp, name + "-output"))
        out[name] = {"status": a.returncode, "stdout": a.stdout, "stderr": a.stderr}
    p = os.path.join(tmp, "summary")
    out["job-summary"] = open(p).read() if os.path.exists(p) else None
    return out


def left_behind(runner):
    """What the scan left in runner.temp but the Markdown report's own directory."""
    return [d for d in os.listdir(runner) if not d.startswith("imgcheck-report.")]


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
check(left_behind(r["runner"]) == [], f"attest: left in runner.temp: {os.listdir(r['runner'])}")
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
    check(left_behind(r["runner"]) == [], f"{inputs['image']}: left in runner.temp")

# The job summary: the Markdown report appended (summary: true is the default), after what the
# job's earlier steps wrote; also when the scan found something (exit 1).
MD = "## imgcheck: 1 error\n\n| rule | finding |\n|---|---|\n| IC001 | cuDNN |\n"
r = run({"image": "docker-daemon:app:1"}, docker_status=1, after=("summary",), markdown=MD)
argv = r["argv"] or []
md_args = [a for a in argv if a.startswith("markdown=")]
check(len(md_args) == 1 and argv[argv.index(md_args[0]) - 1] == "--output",
      f"summary: the scan's --output markdown= {argv}")
check(r["outputs"].get("markdown") == md_args[0][len("markdown="):] if md_args else False,
      f"summary: markdown output {r['outputs']}")
check(r["job-summary"] == MD, f"summary: the job summary {r['job-summary']!r}")
check(r["status"] == 1 and r["summary"] is not None and r["summary"]["status"] == 0,
      "summary: the scan's status kept, the summary step's 0")
check(steps["summary"].get("if") == "${{ !cancelled() }}" and
      steps["comment"].get("if") == "${{ !cancelled() }}",
      "summary, comment: they must run after a failed gate too (if: !cancelled())")

# summary: false (and no comment): no Markdown asked of imgcheck, nothing written.
r = run({"image": "docker-daemon:app:1", "summary": "false"}, after=("summary", "comment"))
argv = r["argv"] or []
check(not any(a.startswith("markdown=") for a in argv), f"summary false: argv {argv}")
check(r["job-summary"] is None, f"summary false: wrote {r['job-summary']!r}")
check(r["summary"]["status"] == 0 and r["comment"]["status"] == 0, "summary false: a step failed")
check(os.listdir(r["runner"]) == [], f"summary false: runner.temp {os.listdir(r['runner'])}")


class FakeGitHub(http.server.ThreadingHTTPServer):
    """The REST API's issue comments on loopback: every request recorded with its method, path
    and Authorization header; pages of 100 with a Link header that points at `elsewhere`."""

    def __init__(self, elsewhere=None, fail=None):
        super().__init__(("127.0.0.1", 0), FakeGitHubHandler)
        self.requests, self.comments, self.next_id = [], {}, 1000
        self.elsewhere, self.fail = elsewhere, fail
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class FakeGitHubHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, code, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_one(self, method):
        gh = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        url = urllib.parse.urlsplit(self.path)
        gh.requests.append((method, url.path, self.headers.get("Authorization"), body))
        if gh.fail:
            return self.answer(gh.fail, {"message": "Resource not accessible by integration"})
        m = re.fullmatch(r"/repos/acme/app/issues/(\d+)/comments", url.path)
        if m and method == "GET":
            query = urllib.parse.parse_qs(url.query)
            page = int(query.get("page", ["1"])[0])  # GitHub's defaults
            per = min(int(query.get("per_page", ["30"])[0]), 100)
            listed = [c for c in gh.comments.values() if c["issue"] == int(m.group(1))]
            headers = [("Link", f'<{gh.elsewhere}/repos/acme/app/issues/{m.group(1)}/comments'
                                f'?page={page + 1}>; rel="next"')] if gh.elsewhere else []
            return self.answer(200, listed[(page - 1) * per:page * per], headers)
        if m and method == "POST":
            gh.next_id += 1
            gh.comments[gh.next_id] = {"id": gh.next_id, "issue": int(m.group(1)),
                                       "body": json.loads(body)["body"]}
            return self.answer(201, gh.comments[gh.next_id])
        m = re.fullmatch(r"/repos/acme/app/issues/comments/(\d+)", url.path)
        if m and method == "PATCH" and int(m.group(1)) in gh.comments:
            gh.comments[int(m.group(1))]["body"] = json.loads(body)["body"]
            return self.answer(200, gh.comments[int(m.group(1))])
        self.answer(404, {"message": "Not Found"})

    def do_GET(self):
        self.handle_one("GET")

    def do_POST(self):
        self.handle_one("POST")

    def do_PATCH(self):
        self.handle_one("PATCH")


TOKEN = "ghs_0123456789abcdefTOKEN"
elsewhere = FakeGitHub()  # where the Link headers point: must hear nothing
api = FakeGitHub(elsewhere=elsewhere.url)
# 150 comments of other people on pull request 7 (so the action's lands on page 2), one that
# quotes another job's marker, one on another pull request.
for i in range(150):
    api.comments[i] = {"id": i, "issue": 7, "body": f"comment {i}"}
api.comments[150] = {"id": 150, "issue": 7, "body": "<!-- imgcheck:other/docker-daemon:app -->\nx"}
api.comments[151] = {"id": 151, "issue": 8, "body": "<!-- imgcheck:gate/docker-daemon:app -->\ny"}
tmp = tempfile.mkdtemp()
event = os.path.join(tmp, "event.json")
json.dump({"pull_request": {"number": 7}}, open(event, "w"))
PR = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": event, "GITHUB_API_URL": api.url,
      "GITHUB_REPOSITORY": "acme/app", "GITHUB_JOB": "gate", "GITHUB_SERVER_URL": elsewhere.url}
COMMENT = {"image": "docker-daemon:app:1", "comment": "true", "github-token": TOKEN}


def ours():
    return [c for c in api.comments.values()
            if c["issue"] == 7 and c["body"].startswith("<!-- imgcheck:gate/")]


r = run(COMMENT, docker_status=1, after=("summary", "comment"), github=PR, markdown=MD)
posts = [q for q in api.requests if q[0] == "POST"]
check(r["comment"]["status"] == 0, f"comment: first run: {r['comment']}")
check(len(posts) == 1 and posts[0][1] == "/repos/acme/app/issues/7/comments",
      f"comment: first run posts once: {[q[:2] for q in api.requests]}")
check([c["body"] for c in ours()] == ["<!-- imgcheck:gate/docker-daemon:app -->\n" + MD],
      f"comment: the comment {ours()}")
check([q[1] for q in api.requests if q[0] == "GET"] == ["/repos/acme/app/issues/7/comments"] * 2,
      "comment: both pages of comments read before posting")
check(r["job-summary"] == MD, "comment: the summary too (on by default)")
first = ours()[0]["id"] if ours() else None

# The next build's run (another tag, another report): the same comment edited, none added.
MD2 = "## imgcheck: no findings\n"
api.requests.clear()
r = run(dict(COMMENT, image="docker-daemon:app:2"), after=("comment",), github=PR, markdown=MD2)
check(r["comment"]["status"] == 0, f"comment: second run: {r['comment']}")
check([(q[0], q[1]) for q in api.requests if q[0] != "GET"] ==
      [("PATCH", f"/repos/acme/app/issues/comments/{first}")],
      f"comment: second run edits, posts nothing: {[q[:2] for q in api.requests]}")
check(len(ours()) == 1 and ours()[0]["body"].endswith(MD2), f"comment: after the edit {ours()}")
check(len(api.comments) == 153, f"comment: {len(api.comments)} comments, want 153 (no duplicate)")
check(api.comments[150]["body"].endswith("x") and api.comments[151]["body"].endswith("y"),
      "comment: another job's comment was changed")

# The token: in every request to the API, never anywhere else, never in the steps' output.
check(all(q[2] == "Bearer " + TOKEN for q in api.requests), "comment: a request without the token")
check(elsewhere.requests == [], f"comment: requests outside the API: {elsewhere.requests}")
check(all(TOKEN not in r["comment"][k] for k in ("stdout", "stderr")), "comment: token in output")
check(left_behind(r["runner"]) == [], f"comment: left in runner.temp {os.listdir(r['runner'])}")

# Not a pull request (a push), or comment: false: no request at all.
api.requests.clear()
r = run(COMMENT, after=("comment",), github=dict(PR, GITHUB_EVENT_NAME="push"))
check(r["comment"]["status"] == 0 and "pull requests only" in r["comment"]["stderr"],
      f"comment on push: {r['comment']}")
r = run(dict(COMMENT, comment="false"), after=("comment",), github=PR)
check(r["comment"]["status"] == 0 and r["comment"]["stderr"] == "", f"comment false: {r['comment']}")
check(api.requests == [], f"comment: requests outside pull requests: {api.requests}")

# A token that may not comment (a fork's pull request): a warning; the gate stays the scan's.
denied = FakeGitHub(fail=403)
r = run(COMMENT, after=("comment",), github=dict(PR, GITHUB_API_URL=denied.url))
check(r["comment"]["status"] == 0 and "::warning::" in r["comment"]["stdout"] and
      "HTTP 403" in r["comment"]["stdout"], f"comment denied: {r['comment']}")
check([q[0] for q in denied.requests] == ["GET"], f"comment denied: {denied.requests}")
for server in (api, elsewhere, denied):
    server.shutdown()

for f in failures:
    print("action: " + f)
print(f"action: {len(failures)} problem(s)" if failures else "action: the steps do what they say")
sys.exit(1 if failures else 0)
