# Shared by the server benchmarks (serve.sh, fleet.sh): a scratch directory with the processes
# started in it, removed on exit; free ports; a TLS pair; a docker-registry. Sourced, not run.

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# $work/tls.crt and tls.key: a self-signed pair for 127.0.0.1.
make_tls() {
  (cd "$work" && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
     -keyout tls.key -out tls.crt -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1) \
    >/dev/null 2>&1
}

# A docker-registry on a free loopback port, storing under $work/storage, its log in
# $work/registry.log; sets reg=127.0.0.1:PORT. $1: "access" keeps its access log (one line a
# request, for counting them).
start_registry() {
  local port access=""
  port=$(free_port)
  [ "${1:-}" = access ] || access=$'  accesslog:\n    disabled: true'
  cat > "$work/registry.yml" <<YAML
version: 0.1
log:
  level: error
$access
storage:
  filesystem:
    rootdirectory: $work/storage
http:
  addr: 127.0.0.1:$port
YAML
  docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.1; done
  reg=127.0.0.1:$port
}
