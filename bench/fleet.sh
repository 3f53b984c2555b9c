#!/usr/bin/env bash
# A rules update across a fleet (issue 33): N digests re-judged by two replicas of imgcheck serve
# sharing one redis-server, from the facts store, with no blob pulled. See bench/README.md
# ("A fleet re-judging").
#
#   bench/fleet.sh                     # build/imgcheck, 1,000 digests
#   IMAGES=200 bench/fleet.sh
#
# The images are the demo image's layers under N configs (one label each): N manifest digests,
# each a real scan (IC001, IC020). They are pushed once; the replicas judge them from the work
# queue, then `imgcheck rules update` installs newer rule data and both get SIGHUP. Printed: the
# time until every digest has a verdict under the new policy, the blob requests the registry
# served meanwhile (from its access log), and Redis's memory.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
imgcheck=${IMGCHECK:-$root/build/imgcheck}
demo=${DEMO:-$root/build/demo/image}
images=${IMAGES:-1000}

need() { command -v "$1" >/dev/null || { echo "bench: $1 is missing (scripts/deps.sh installs it)" >&2; exit 1; }; }
for p in openssl docker-registry redis-server redis-cli curl python3; do need "$p"; done
[ -x "$imgcheck" ] || { echo "bench: no imgcheck at $imgcheck (build it, or set IMGCHECK)" >&2; exit 1; }
[ -f "$demo/index.json" ] || { echo "bench: no demo image at $demo (cmake --build build --target demo_image)" >&2; exit 1; }

# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"
now() { date +%s.%N; }
make_tls
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/verdict-key"
start_registry access  # the blob requests are counted in its access log
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
rcli() { redis-cli -p "$redis_port" "$@"; }

echo "== pushing $images images (the demo's layers, a config each) to $reg"
t0=$(now)
python3 - "$demo" "$reg" "$images" > "$work/digests" <<'PY'
import hashlib, json, os, sys, urllib.request
layout, reg, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def blob(d): return open(os.path.join(layout, "blobs", "sha256", d.split(":")[1]), "rb").read()
index = json.load(open(os.path.join(layout, "index.json")))
manifest = json.loads(blob(index["manifests"][0]["digest"]))
config = json.loads(blob(manifest["config"]["digest"]))
def req(method, url, data=None, ctype="application/octet-stream"):
    r = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": ctype})
    with urllib.request.urlopen(r) as resp: return resp
def put_blob(repo, data):
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    try:
        req("HEAD", f"http://{reg}/v2/{repo}/blobs/{d}"); return d
    except urllib.error.HTTPError: pass
    loc = req("POST", f"http://{reg}/v2/{repo}/blobs/uploads/", b"").headers["Location"]
    req("PUT", loc + ("&" if "?" in loc else "?") + "digest=" + d, data)
    return d
for l in manifest["layers"]: put_blob("bench/base", blob(l["digest"]))
for i in range(n):
    repo = f"bench/app{i}"
    for l in manifest["layers"]:  # a cross-repository mount, as a registry client does it
        req("POST", f"http://{reg}/v2/{repo}/blobs/uploads/?mount={l['digest']}&from=bench/base", b"")
    c = dict(config); c["config"] = dict(c.get("config") or {})
    c["config"]["Labels"] = dict(c["config"].get("Labels") or {}, **{"imgcheck.bench": str(i)})
    data = json.dumps(c).encode()
    m = dict(manifest); m["config"] = dict(manifest["config"], digest=put_blob(repo, data), size=len(data))
    body = json.dumps(m).encode()
    req("PUT", f"http://{reg}/v2/{repo}/manifests/1", body, m.get("mediaType", "application/vnd.oci.image.manifest.v1+json"))
    print(f"{repo} sha256:{hashlib.sha256(body).hexdigest()}")
PY
echo "pushed in $(python3 -c "print(round($(now) - $t0, 1))") s"

# Two replicas on one Redis, each with its own layer cache.
mkdir -p "$work/rules-cache"
start() {  # $1: name
  local port; port=$(free_port)
  "$imgcheck" serve --listen "127.0.0.1:$port" --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
    --allow-registry "$reg" --redis "redis://127.0.0.1:$redis_port" \
    --verdict-key-file "$work/verdict-key" --rules-cache "$work/rules-cache" \
    --cache-dir "$work/cache-$1" --ready-file "$work/ready-$1" >"$work/serve-$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do [ -f "$work/ready-$1" ] && break; sleep 0.05; done
  echo "$! $port"
}
read -r pid_a port_a < <(start a)
read -r pid_b port_b < <(start b)
verdicts() { rcli --scan --pattern 'imgcheck:verdict:*' | grep -vc ':lock$' || true; }
wait_verdicts() {  # $1: how many
  while [ "$(verdicts)" -lt "$1" ]; do sleep 0.5; done
}
blobs() { grep -c '"GET /v2/[^ ]*/blobs/\|"HEAD /v2/[^ ]*/blobs/' "$work/registry.log" || true; }

echo "== first judgement: $images digests on the work queue, two replicas"
awk -v reg="$reg" '{ print "XADD imgcheck:work:now * d " $2 " r docker://" reg "/" $1 "@" $2 }' \
  "$work/digests" | rcli >/dev/null
t0=$(now)
wait_verdicts "$images"
echo "first judgement: $(python3 -c "print(round($(now) - $t0, 1))") s, blob requests $(blobs)"

echo "== rules update, SIGHUP to both: every digest re-judged"
mkdir -p "$work/newer"
cp "$root"/rules/*.json "$work/newer/"
python3 - "$work/newer/version.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1])); v["date"] = "2999-01-01"; json.dump(v, open(sys.argv[1], "w"))
PY
"$imgcheck" rules push "$work/newer" "oci:$work/rules-layout:1" >/dev/null
"$imgcheck" rules update "oci:$work/rules-layout:1" --rules-cache "$work/rules-cache" >/dev/null
blobs_before=$(blobs)
mem_before=$(rcli info memory | awk -F: '/^used_memory:/ { print $2 }' | tr -d '\r')
t0=$(now)
kill -HUP "$pid_a" "$pid_b"
wait_verdicts $((2 * images))
took=$(python3 -c "print(round($(now) - $t0, 1))")
mem_after=$(rcli info memory | awk -F: '/^used_memory:/ { print $2 }' | tr -d '\r')
metric() { curl -ks "https://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
echo "re-judged $images digests in $took s; blob requests meanwhile: $(( $(blobs) - blobs_before ))"
for r in "a $port_a" "b $port_b"; do
  set -- $r
  echo "replica $1: scans $(metric "$2" 'imgcheck_scans_total{result="ok"}'), judged without pull" \
       "$(metric "$2" imgcheck_judged_without_pull_total), facts hits" \
       "$(metric "$2" 'imgcheck_facts_lookups_total{result="hit"}')"
done
echo "redis used_memory: $((mem_before / 1024)) KiB before the reload, $((mem_after / 1024)) KiB after;" \
     "facts $(rcli get imgcheck:facts:bytes) bytes in $(rcli hlen imgcheck:facts:sizes) entries"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
