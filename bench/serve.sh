#!/usr/bin/env bash
# imgcheck serve under load, on loopback: a real docker-registry holding the demo image (and a
# relabelled copy of it, a second digest), imgcheck serve over TLS, and wrk posting
# AdmissionReviews with 200 connections. See bench/README.md ("imgcheck serve").
#
#   bench/serve.sh                     # build/imgcheck, 20 s warm, 200 connections
#   DURATION=30s CONNECTIONS=400 bench/serve.sh
#
# Warm: every request's image has a verdict (the first request scanned it): this is the
# steady state of an admission hook. Cold: 200 connections ask at once for a digest nobody has
# scanned; single flight must turn that into one scan, and the requests that waited for it.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
imgcheck=${IMGCHECK:-$root/build/imgcheck}
demo=${DEMO:-$root/build/demo/image}
duration=${DURATION:-20s}
conns=${CONNECTIONS:-200}
threads=${THREADS:-2}

need() { command -v "$1" >/dev/null || { echo "bench: $1 is missing (scripts/deps.sh installs it)" >&2; exit 1; }; }
for p in wrk openssl docker-registry skopeo curl; do need "$p"; done
[ -x "$imgcheck" ] || { echo "bench: no imgcheck at $imgcheck (build it, or set IMGCHECK)" >&2; exit 1; }
[ -f "$demo/index.json" ] || { echo "bench: no demo image at $demo (cmake --build build --target demo_image)" >&2; exit 1; }

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
make_tls

# The registry, and the images.
start_registry
skopeo --insecure-policy copy -q --dest-tls-verify=false "oci:$demo:latest" "docker://$reg/demo:warm"
# The cold image: the demo image with one more label, so a new config and manifest digest over
# the same layers (skopeo would reuse blobs, and a recompressed copy would get the same digest).
cp -r "$demo" "$work/layout"
umoci config --image "$work/layout:latest" --tag cold --config.label imgcheck.bench=cold
skopeo --insecure-policy copy -q --dest-tls-verify=false "oci:$work/layout:cold" \
  "docker://$reg/demo:cold"

# The server: no layer cache, so the cold scan reads its layers from the registry.
port=$(free_port)
"$imgcheck" serve --listen "127.0.0.1:$port" --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
  --allow-registry "$reg" --no-cache --scan-budget 30 --ready-file "$work/ready" \
  >"$work/serve.log" 2>&1 &
pids+=($!)
serve_pid=$!
for _ in $(seq 200); do [ -f "$work/ready" ] && break; sleep 0.05; done
url=https://127.0.0.1:$port

review() {  # an AdmissionReview of a Deployment running image $1, as the API server sends it
  cat <<JSON
{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"bench","kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},"name":"web","namespace":"bench","operation":"CREATE","userInfo":{"username":"bench"},"object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"$1"}]}}}},"dryRun":false}}
JSON
}
lua() {  # a wrk script posting $1
  local body
  body=$(review "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')
  printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = "%s"\n' "$body"
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$serve_pid/stat"; }  # utime + stime
requests() { curl -ks "$url/metrics" | awk '$1 ~ /^imgcheck_requests_total\{path="\/v1\/admission"/ { n += $2 } END { print n + 0 }'; }
metric() { curl -ks "$url/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

echo "== warm: one request scans demo:warm, then $conns connections for $duration"
review "$reg/demo:warm" | curl -ks -X POST -H 'Content-Type: application/json' --data-binary @- \
  "$url/v1/admission?timeout=30s" | head -c 300; echo
lua "$reg/demo:warm" > "$work/warm.lua"
ticks0=$(cpu_ticks); req0=$(requests)
wrk -t"$threads" -c"$conns" -d"$duration" --latency -s "$work/warm.lua" "$url/v1/admission"
ticks1=$(cpu_ticks); req1=$(requests)
hz=$(getconf CLK_TCK)
echo "server CPU per warm request: $(( (ticks1 - ticks0) * 1000000 / hz / (req1 - req0) )) us" \
     "($(( req1 - req0 )) requests, $(( (ticks1 - ticks0) / hz )) CPU seconds)"

echo "== cold: $conns connections ask for demo:cold, never scanned; it must be scanned once"
scans_before=$(metric 'imgcheck_scans_total{result="ok"}')
lua "$reg/demo:cold" > "$work/cold.lua"
wrk -t"$threads" -c"$conns" -d5s --timeout 30s --latency -s "$work/cold.lua" "$url/v1/admission"
scans_after=$(metric 'imgcheck_scans_total{result="ok"}')
echo "scans during the cold run: $((scans_after - scans_before))"
curl -ks "$url/metrics" | grep -E '^imgcheck_(scan_seconds_(sum|count)|verdict_cache|scans_total)'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
