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
push_variants "$images" > "$work/digests"
echo "pushed in $(python3 -c "print(round($(now) - $t0, 1))") s"

# Two replicas on one Redis, each with its own layer cache.
mkdir -p "$work/rules-cache"
# The publisher of the newer rule data below: the replicas trust its key (docs/rules-data.md).
"$imgcheck" key generate --output-key-prefix "$work/publisher" >/dev/null
start() {  # $1: name
  local port; port=$(free_port)
  "$imgcheck" serve --listen "127.0.0.1:$port" --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
    --allow-registry "$reg" --redis "redis://127.0.0.1:$redis_port" \
    --verdict-key-file "$work/verdict-key" --rules-cache "$work/rules-cache" \
    --rules-key "$work/publisher.pub" \
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
"$imgcheck" rules push "$work/newer" "oci:$work/rules-layout:1" --key "$work/publisher.key" >/dev/null
"$imgcheck" rules update "oci:$work/rules-layout:1" --rules-cache "$work/rules-cache" \
  --rules-key "$work/publisher.pub" >/dev/null
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
