#!/usr/bin/env python3
"""The GitLab template's merge-request note, run as a job would run it.

    tests/gitlab_check.py SOURCE_DIR        (ctest runs it: gitlab_note_step)

Takes `.imgcheck`'s after_script from docker/gitlab/imgcheck.gitlab-ci.yml and runs it with sh in a
directory holding an imgcheck.md (what the scan wrote), the job's variables set as GitLab sets
them, against a fake GitLab REST API on a loopback port (real curl and jq, as the imgcheck image
has them). Checks: one note created, then edited in place by the next run (no duplicate), the
token on every request to the API and nowhere else, nothing sent outside merge-request pipelines
or without a token; and that the scan writes imgcheck.md and the job keeps it as an artifact.
"""
import http.server
import os
import re
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import json

import yaml

source = sys.argv[1]
template = yaml.safe_load(open(os.path.join(source, "docker/gitlab/imgcheck.gitlab-ci.yml")))
job = template[".imgcheck"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


class FakeGitLab(http.server.ThreadingHTTPServer):
    """Merge-request notes of project 42 on loopback, every request recorded (method, path,
    PRIVATE-TOKEN header, body); pages as GitLab gives them (page 1, 20 a page by default)."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests, self.notes, self.next_id = [], {}, 5000
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/api/v4"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_one(self, method):
        gl = self.server
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode() if length else ""
        url = urllib.parse.urlsplit(self.path)
        gl.requests.append((method, url.path, self.headers.get("PRIVATE-TOKEN"), raw))
        form = urllib.parse.parse_qs(raw, keep_blank_values=True)
        m = re.fullmatch(r"/api/v4/projects/42/merge_requests/(\d+)/notes(?:/(\d+))?", url.path)
        if not m:
            return self.answer(404, {"message": "404 Not Found"})
        mr, note = int(m.group(1)), m.group(2) and int(m.group(2))
        if method == "GET" and note is None:
            query = urllib.parse.parse_qs(url.query)
            page = int(query.get("page", ["1"])[0])
            per = min(int(query.get("per_page", ["20"])[0]), 100)
            listed = [n for n in gl.notes.values() if n["mr"] == mr]
            return self.answer(200, listed[(page - 1) * per:page * per])
        if method == "POST" and note is None:
            gl.next_id += 1
            gl.notes[gl.next_id] = {"id": gl.next_id, "mr": mr, "body": form["body"][0]}
            return self.answer(201, gl.notes[gl.next_id])
        if method == "PUT" and note in gl.notes and gl.notes[note]["mr"] == mr:
            gl.notes[note]["body"] = form["body"][0]
            return self.answer(200, gl.notes[note])
        self.answer(404, {"message": "404 Not found"})

    def do_GET(self):
        self.handle_one("GET")

    def do_POST(self):
        self.handle_one("POST")

    def do_PUT(self):
        self.handle_one("PUT")


def run(markdown, variables):
    """The after_script in a fresh build directory holding imgcheck.md (None: no report)."""
    work = tempfile.mkdtemp()
    if markdown is not None:
        with open(os.path.join(work, "imgcheck.md"), "w") as f:
            f.write(markdown)
    env = {"PATH": os.environ["PATH"], "HOME": work, "TMPDIR": work}
    env.update(variables)
    outs = []
    for script in job["after_script"]:
        r = subprocess.run(["sh", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                           timeout=60)
        outs.append(r)
    return {"status": max(r.returncode for r in outs), "stderr": "".join(r.stderr for r in outs),
            "left": [f for f in os.listdir(work) if f != "imgcheck.md"]}


# The scan writes the Markdown report, the job keeps it.
check("--output markdown=imgcheck.md" in " ".join(job["script"]),
      f"the scan writes no imgcheck.md: {job['script']}")
check("imgcheck.md" in job["artifacts"]["paths"], f"artifacts {job['artifacts']}")
check(job["artifacts"].get("when") == "always", "artifacts are kept only on success")

TOKEN = "glpat-0123456789abcdefTOKEN"
api = FakeGitLab()
for i in range(150):  # other notes first, so that the job's lands on page 2
    api.notes[i] = {"id": i, "mr": 3, "body": f"note {i}"}
api.notes[150] = {"id": 150, "mr": 3, "body": "<!-- imgcheck:other-job -->\nx"}
api.notes[151] = {"id": 151, "mr": 4, "body": "<!-- imgcheck:imgcheck -->\ny"}
MR = {"CI_API_V4_URL": api.url, "CI_PROJECT_ID": "42", "CI_MERGE_REQUEST_IID": "3",
      "CI_JOB_NAME": "imgcheck", "IMGCHECK_GITLAB_TOKEN": TOKEN}
MD = "## imgcheck: 1 error\n\n| rule | finding |\n|---|---|\n| IC001 | cuDNN & \"quotes\" |\n"


def ours():
    return [n for n in api.notes.values() if n["mr"] == 3 and n["body"].startswith("<!-- imgcheck:imgcheck -->")]


r = run(MD, MR)
check(r["status"] == 0 and r["stderr"] == "", f"note: first run {r}")
check([q[0] for q in api.requests if q[0] != "GET"] == ["POST"],
      f"note: first run creates one: {[q[:2] for q in api.requests]}")
check([n["body"] for n in ours()] == ["<!-- imgcheck:imgcheck -->\n" + MD], f"note: {ours()}")
check(r["left"] == [], f"note: left in the build directory: {r['left']}")

MD2 = "## imgcheck: no findings\n"
api.requests.clear()
r = run(MD2, MR)
first = ours()[0]["id"] if ours() else None
check(r["status"] == 0 and r["stderr"] == "", f"note: second run {r}")
check([(q[0], q[1]) for q in api.requests if q[0] != "GET"] ==
      [("PUT", f"/api/v4/projects/42/merge_requests/3/notes/{first}")],
      f"note: second run edits in place: {[q[:2] for q in api.requests]}")
check(len(ours()) == 1 and ours()[0]["body"].endswith(MD2), f"note: after the edit {ours()}")
check(len(api.notes) == 153, f"note: {len(api.notes)} notes, want 153 (no duplicate)")
check(api.notes[150]["body"].endswith("x") and api.notes[151]["body"].endswith("y"),
      "note: another job's note was changed")
check(all(q[2] == TOKEN for q in api.requests), "note: a request without the token")
check(TOKEN not in r["stderr"], "note: the token in the job's log")

# Not a merge-request pipeline, no token, or no report (the scan could not run): no request.
api.requests.clear()
for variables, markdown in ((dict(MR, CI_MERGE_REQUEST_IID=""), MD),
                            (dict(MR, IMGCHECK_GITLAB_TOKEN=""), MD), (MR, None)):
    r = run(markdown, variables)
    check(r["status"] == 0 and r["stderr"] == "", f"note skipped: {r}")
check(api.requests == [], f"note: requests where none belong: {[q[:2] for q in api.requests]}")

# An API that refuses (a token without the api scope): one line on stderr, the job's verdict kept.
r = run(MD, dict(MR, CI_PROJECT_ID="7"))
check(r["status"] == 0 and "could not list the notes of merge request !3 (HTTP 404)" in r["stderr"]
      and r["stderr"].count("\n") == 1, f"note refused: {r}")
api.shutdown()

for f in failures:
    print("gitlab: " + f)
print(f"gitlab: {len(failures)} problem(s)" if failures else "gitlab: the note does what it says")
sys.exit(1 if failures else 0)
