# Shared by the server benchmarks (serve.sh, fleet.sh, attested.sh): a scratch directory with the processes
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

# $1 images in $reg: the demo image's layers (pushed once, mounted into each repository) under a
# config each (one label), so $1 manifest digests of the same real image. Prints "REPO DIGEST"
# lines; each is pushed as REPO:1.
push_variants() {
  python3 - "$demo" "$reg" "$1" <<'PY'
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
}
