#!/usr/bin/env bash
# imgcheck's benchmark: the reference image read by imgcheck (cold, 1 and N threads; warm, from
# the layer cache), by the decompression floor and by the peers, in one run. Prints each median
# and its ratio to the floor, the CPU (model, SHA-NI), and where a cold scan's CPU time goes
# (perf, when it can sample this process). See bench/README.md.
#
#   bench/run.sh                 # build/imgcheck scan, 3 runs each (warm: 10), N = cores
#   RUNS=5 JOBS=4 IMGCHECK=build-x/imgcheck COMMAND=catalog PEERS=0 PERF=0 bench/run.sh
#
# The reference image is written once to $BENCH_DIR/ref (default build/bench, outside git) by
# bench/make_reference.py; delete it to rebuild. Every run reads the blobs from the page cache
# (they are read once first), so the numbers are CPU cost, not disk speed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bench_dir=${BENCH_DIR:-$root/build/bench}
imgcheck=${IMGCHECK:-$root/build/imgcheck}
command=${COMMAND:-scan}        # the subcommand timed: it must load (capture + merge) the image
runs=${RUNS:-3}
warm_runs=${WARM_RUNS:-10}
jobs=${JOBS:-$(nproc)}          # the "--jobs N" line; --jobs 1 is always measured
peers=${PEERS:-1}               # 0: skip gzip, tar + libtree and umoci (the floor stays)
perf_profile=${PERF:-1}         # 0: skip the perf breakdown
ref=$bench_dir/ref
cache=$bench_dir/cache
scratch=$bench_dir/scratch

need() { command -v "$1" >/dev/null || { echo "bench: $1 is missing (scripts/deps.sh installs it)" >&2; exit 1; }; }
for p in igzip python3 /usr/bin/time; do need "$p"; done
if [ "$peers" = 1 ]; then for p in gzip tar libtree umoci; do need "$p"; done; fi
[ -x "$imgcheck" ] || { echo "bench: no imgcheck at $imgcheck (build it, or set IMGCHECK)" >&2; exit 1; }

if [ ! -f "$ref/layers.txt" ]; then
  echo "bench: writing the reference image to $ref (once)" >&2
  rm -rf "$ref.tmp"
  python3 "$root/bench/make_reference.py" "$ref.tmp"
  mv "$ref.tmp" "$ref"
fi
mapfile -t blobs < "$ref/layers.txt"
blobs=("${blobs[@]/#/$ref/}")
image="oci:$ref:latest"
cat "${blobs[@]}" > /dev/null  # into the page cache

# "WALL CPU" seconds of one run of the shell words "$@" (functions below are exported): wall
# from $EPOCHREALTIME (microseconds), CPU (user + system, children included) from time(1). On a
# busy machine the wall time includes waiting for a core; the CPU time does not.
time_once() {
  local start=$EPOCHREALTIME
  /usr/bin/time -f '%U %S' -o "$bench_dir/time.out" bash -c "$*" > /dev/null 2>&1 \
    || { echo "bench: failed: $*" >&2; exit 1; }
  local end=$EPOCHREALTIME
  rm -rf "$scratch"  # what tar and umoci wrote, removed untimed
  python3 -c "u, s = open('$bench_dir/time.out').read().split()[-2:]; print(f'{$end - $start:.4f} {float(u) + float(s):.2f}')"
}

# "WALL CPU" medians of $1 runs of the rest.
median() {
  local n=$1; shift
  for ((i = 0; i < n; i++)); do time_once "$@"; done | python3 -c '
import statistics, sys
rows = [tuple(map(float, l.split())) for l in sys.stdin]
print(f"{statistics.median(r[0] for r in rows):.4f} {statistics.median(r[1] for r in rows):.2f}")'
}

decompress_all() { local tool=$1; for b in $BLOBS; do "$tool" -dc < "$b"; done > /dev/null; }
tar_and_libtree() {
  mkdir -p "$scratch"
  for b in $BLOBS; do tar -xzf "$b" -C "$scratch"; done
  libtree "$scratch/usr/local/cuda/lib64/libcudnn.so.9" > /dev/null
}
umoci_unpack() { umoci raw unpack --rootless --image "$ref:latest" "$scratch"; }
# scan exits 1 when it has findings at or above --fail-on: that is a result, not a failure.
imgcheck_run() { "$imgcheck" "$command" "$image" --quiet "$@" || [ $? = 1 ]; }
export -f decompress_all tar_and_libtree umoci_unpack imgcheck_run
export imgcheck command image scratch ref
export BLOBS="${blobs[*]}"  # arrays do not cross bash -c; decompress_all re-splits it
declare -A t
cpu_model=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
sha_ni=$(grep -qw sha_ni /proc/cpuinfo && echo yes || echo no)
echo "bench: $(nproc) cores ($cpu_model, SHA-NI $sha_ni), image $(du -sh --apparent-size "$ref/blobs" | cut -f1) compressed, $runs runs each" >&2
t[floor]=$(median "$runs" decompress_all igzip)
if [ "$peers" = 1 ]; then
  t[gzip]=$(median "$runs" decompress_all gzip)
  t[tar]=$(median "$runs" tar_and_libtree)
  t[umoci]=$(median "$runs" umoci_unpack)
fi
t[cold1]=$(median "$runs" imgcheck_run --jobs 1 --no-cache)
t[coldN]=$(median "$runs" imgcheck_run --jobs "$jobs" --no-cache)
rm -rf "$cache"
imgcheck_run --cache-dir "$cache" > /dev/null  # fills the cache
t[warm]=$(median "$warm_runs" imgcheck_run --cache-dir "$cache")
rss_kb=0
for j in 1 "$jobs"; do
  kb=$( (/usr/bin/time -f %M "$imgcheck" "$command" "$image" --quiet --no-cache --jobs $j >/dev/null || true) 2>&1 | tail -1)
  [ "$kb" -gt "$rss_kb" ] && rss_kb=$kb
done
# Where a cold --jobs 1 run's CPU time goes: perf's samples by shared object and by symbol
# (user space; the kernel's too where perf_event_paranoid allows).
breakdown=""
if [ "$perf_profile" = 1 ] && command -v perf > /dev/null; then
  if perf record -q -o "$bench_dir/perf.data" -F 999 -- "$imgcheck" "$command" "$image" --quiet \
      --no-cache --jobs 1 > /dev/null 2>&1 || [ $? = 1 ]; then
    # libcrypto has no symbols here: its share is SHA-256 (and MD5 where IC015 wants one).
    report() { perf report -i "$bench_dir/perf.data" --stdio --percent-limit 1 "$@" 2> /dev/null \
      | grep -v -e '^#' -e '^$' -e '\] 0x0' | head -12; }
    breakdown="$(report --sort dso)
$(report --sort dso,sym)"
  fi
fi

row() {
  read -r wall cpu <<< "$2"
  read -r fwall fcpu <<< "${t[floor]}"
  python3 -c "print(f'{\"$1\":<46} {$wall:>8.3f} s {$wall / $fwall:>6.2f}x {$cpu:>8.2f} s {$cpu / $fcpu:>6.2f}x')"
}
echo
echo "reference image: $image"
echo "machine: $(nproc) cores, $cpu_model, SHA-NI $sha_ni, load average $(cut -d' ' -f1 /proc/loadavg), $(date -u +%F)"
printf '%-46s %10s %7s %10s %7s\n' "median of runs" "wall" "/floor" "CPU" "/floor"
row "igzip -dc, layers one after another (floor)" "${t[floor]}"
if [ "$peers" = 1 ]; then
  row "gzip -dc" "${t[gzip]}"
  row "tar -xzf + libtree libcudnn.so.9" "${t[tar]}"
  row "umoci raw unpack" "${t[umoci]}"
fi
row "imgcheck $command, cold, --jobs 1" "${t[cold1]}"
row "imgcheck $command, cold, --jobs $jobs" "${t[coldN]}"
row "imgcheck $command, warm (all layers cached)" "${t[warm]}"
echo "imgcheck peak RSS (cold, --jobs 1 and $jobs): $((rss_kb / 1024)) MB"
if [ -n "$breakdown" ]; then
  echo
  echo "where the CPU time of a cold --jobs 1 run goes (perf: by shared object, then symbol; >= 1 %):"
  echo "$breakdown"
fi
