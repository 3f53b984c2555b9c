#!/usr/bin/env bash
# imgcheck serve under the attacks of issue #20, on loopback: legitimate reviews while 300
# clients drip TLS handshakes and 800 hold idle connections, then the server's RSS under the
# largest single requests and a mix of them. See bench/README.md ("imgcheck serve under attack").
#
#   bench/serve-attack.sh              # build/imgcheck and build/bench/serve_attack
#   REVIEWS=500 bench/serve-attack.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
imgcheck=${IMGCHECK:-$root/build/imgcheck}
attack=${ATTACK:-$root/build/bench/serve_attack}
reviews=${REVIEWS:-200}
for f in "$imgcheck" "$attack"; do
  [ -x "$f" ] || { echo "bench: no $f (cmake --build build --target imgcheck serve_attack)" >&2; exit 1; }
done
command -v openssl >/dev/null || { echo "bench: openssl is missing" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"  # 1,100 attacker sockets here, as many in the server

work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
(cd "$work" && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
   -keyout tls.key -out tls.crt -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1) \
  >/dev/null 2>&1
# Reviews name an image outside --allow-registry: answered at once, so the figures are the
# server's, not a registry's.
"$imgcheck" serve --listen 127.0.0.1:0 --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
  --allow-registry 127.0.0.1:1 --cache-dir "$work/cache" --ready-file "$work/port" \
  2>"$work/serve.log" &
pid=$!
for _ in $(seq 100); do [ -f "$work/port" ] && break; sleep 0.1; done
[ -f "$work/port" ] || { cat "$work/serve.log" >&2; exit 1; }
/usr/bin/time -f "serve_attack CPU: %U s user, %S s sys" "$attack" "$(cat "$work/port")" "$pid" "$reviews"
echo "server CPU (user+sys): $(awk "{print (\$14+\$15)/$(getconf CLK_TCK)}" "/proc/$pid/stat") s"
