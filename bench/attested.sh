#!/usr/bin/env bash
# serve --trust-key (issue 34): images the server never scanned, each decided from its signed
# attestation. See bench/README.md ("Verdicts from attestations").
#
#   bench/attested.sh                  # build/imgcheck, 200 images
#   IMAGES=500 bench/attested.sh
#   FORMAT=bundle bench/attested.sh    # attested as Sigstore bundle referrers (--attest-format)
#
# N digests of the demo image (bench/lib.sh push_variants) are each scanned and attested by the
# CLI (`scan --attest`, as the CI gate does), then a fresh imgcheck serve with --trust-key and no
# layer cache is asked about each once, over one kept-alive connection, one request at a time:
# every answer must be the attested verdict (deny: the demo fails), with no scan. Printed: the
# latency of those first answers (median, p90, p99, max) and the server's counters.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
imgcheck=${IMGCHECK:-$root/build/imgcheck}
demo=${DEMO:-$root/build/demo/image}
images=${IMAGES:-200}
format=${FORMAT:-att}

need() { command -v "$1" >/dev/null || { echo "bench: $1 is missing (scripts/deps.sh installs it)" >&2; exit 1; }; }
for p in openssl docker-registry curl python3; do need "$p"; done
[ -x "$imgcheck" ] || { echo "bench: no imgcheck at $imgcheck (build it, or set IMGCHECK)" >&2; exit 1; }
[ -f "$demo/index.json" ] || { echo "bench: no demo image at $demo (cmake --build build --target demo_image)" >&2; exit 1; }

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
make_tls
start_registry
push_variants "$images" > "$work/digests"
"$imgcheck" key generate --output-key-prefix "$work/ci" >/dev/null

echo "== attesting $images digests (scan --attest --attest-format $format, the CI gate's step)"
t0=$(date +%s)
while read -r repo digest; do
  rc=0
  "$imgcheck" scan "docker://$reg/$repo@$digest" --attest --attest-format "$format" --key "$work/ci.key" \
    --cache-dir "$work/cli-cache" >/dev/null 2>"$work/attest.err" || rc=$?
  [ "$rc" = 1 ] || { cat "$work/attest.err" >&2; echo "bench: scan --attest exited $rc" >&2; exit 1; }
done < "$work/digests"
echo "attested in $(($(date +%s) - t0)) s"

port=$(free_port)
"$imgcheck" serve --listen "127.0.0.1:$port" --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
  --allow-registry "$reg" --trust-key "$work/ci.pub" --no-cache --ready-file "$work/ready" \
  >"$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do [ -f "$work/ready" ] && break; sleep 0.05; done

echo "== one admission request a digest, never scanned by this server, one connection"
python3 - "$port" "$reg" "$work/digests" <<'PY'
import http.client, json, ssl, statistics, sys, time
port, reg, digests = sys.argv[1], sys.argv[2], [l.split() for l in open(sys.argv[3])]
ctx = ssl._create_unverified_context()
conn = http.client.HTTPSConnection("127.0.0.1", int(port), context=ctx)
def review(image):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "app", "image": image}]}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "bench", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": "bench", "operation": "CREATE", "userInfo": {"username": "b"},
                    "object": pod, "dryRun": False}})
times = []
for repo, digest in digests:
    body = review(f"{reg}/{repo}@{digest}")
    t = time.perf_counter()
    conn.request("POST", "/v1/admission?timeout=10s", body, {"Content-Type": "application/json"})
    resp = json.loads(conn.getresponse().read())["response"]
    times.append(time.perf_counter() - t)
    if resp["allowed"]:
        sys.exit(f"bench: {repo}@{digest} was admitted; the attestation says it fails")
first, rest = times[0], sorted(times[1:])
q = statistics.quantiles(rest, n=100, method="inclusive")
ms = lambda s: f"{s * 1000:.1f} ms"
print(f"{len(times)} answers, all denied as attested; the first (connections opening) {ms(first)};"
      f" the other {len(rest)}: median {ms(q[49])}, p90 {ms(q[89])}, p99 {ms(q[98])},"
      f" max {ms(rest[-1])}")
PY
curl -ks "https://127.0.0.1:$port/metrics" |
  grep -E '^imgcheck_(attestation_verdicts_total|attestations_rejected_total|scans_total)' || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
