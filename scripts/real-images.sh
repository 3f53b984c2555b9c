#!/bin/sh
# Builds images from real files and scans them: NVIDIA's wheels, framework wheels and this
# machine's CUDA toolkit, laid out as pip installs them (site-packages, dist-info with RECORD).
# Outside the test suite: it downloads (pip download --no-deps, cached in $WHEELS, default .whl/).
#   scripts/real-images.sh [build-dir]      (default: build)
#   WHEELS=/work/cache/wheels ONLY="torch24 tf218" scripts/real-images.sh   (some sections only)
# Sections: toolkit deb ort torch torch24 torch25 tf215 tf216 tf217 tf218 (tf218-mixed) jax05
# ort-cudnn9. TIME=1, CATALOG=1, IMGCHECK_PROFILE=1: see timed() and scan().
# Prints each scan's text report; the expectations are stated before each scan.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
imgcheck="$top/${1:-build}/imgcheck"
cache="${WHEELS:-$top/.whl}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
site=usr/local/lib/python3.11/site-packages
mkdir -p "$cache"

# fetch SPEC: the wheel of SPEC for CPython 3.11 on x86-64 Linux, into the cache.
fetch() {
  pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux2014_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_28_x86_64 -d "$cache" "$1" >/dev/null
}
# install ROOT WHEEL...: unpacked into ROOT's site-packages, as pip does.
install() {
  root=$1; shift
  mkdir -p "$root/$site"
  for w in "$@"; do python3 -m zipfile -e "$w" "$root/$site"; done
}
wheel() { ls "$cache"/$1-*.whl | head -n 1; }
# pins WHEEL [EXTRA]: the nvidia-* wheels WHEEL's METADATA pins (Requires-Dist: NAME ==V) for
# Linux x86-64, with those of EXTRA, as NAME==V words.
pins() {
  python3 - "$@" <<'PY'
import re, sys, zipfile
whl, extra = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
z = zipfile.ZipFile(whl)
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
for line in z.read(meta).decode().splitlines():
    m = re.match(r"Requires-Dist: (nvidia-[\w-]+) *\(?==([\w.]+)\)? *(?:; *(.*))?$", line)
    if not m:
        continue
    marker = m.group(3) or ""
    want = re.search(r"extra == ['\"]([\w-]+)['\"]", marker)
    if (want and want.group(1) != extra) or "Windows" in marker or "aarch64" in marker:
        continue
    print(m.group(1) + "==" + m.group(2))
PY
}
# want SECTION: true when ONLY is unset or names SECTION.
want() { [ -z "${ONLY:-}" ] || case " $ONLY " in *" $1 "*) true ;; *) false ;; esac; }
# stack ROOT PIN...: fetches each pinned wheel and installs them all into ROOT.
stack() {
  root=$1; shift
  wheels=""
  for pin in "$@"; do
    fetch "$pin"
    name=$(echo "${pin%%==*}" | tr - _)
    wheels="$wheels $(wheel "$name-${pin#*==}")"
  done
  # shellcheck disable=SC2086 # one wheel per word
  install "$root" $wheels
}
# archive ROOT OUT ENV...: ROOT as a one-layer docker-archive OUT whose configuration sets ENV
# (KEY=VALUE words): dir: has no configuration, and LD_LIBRARY_PATH lives there.
archive() {
  root=$1 out=$2; shift 2
  python3 - "$root" "$out" "$@" <<'PY'
import hashlib, json, os, subprocess, sys, tempfile
root, out, env = sys.argv[1], sys.argv[2], sys.argv[3:]
with tempfile.TemporaryDirectory(dir=os.path.dirname(out)) as tmp:
    layer = os.path.join(tmp, "layer.tar")
    subprocess.run(["tar", "-C", root, "-cf", layer, "."], check=True)
    h = hashlib.sha256()
    with open(layer, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": env},
                      "rootfs": {"type": "layers", "diff_ids": ["sha256:" + h.hexdigest()]},
                      "history": [{"created_by": "pip install (real wheels)"}]}).encode()
    name = hashlib.sha256(cfg).hexdigest() + ".json"
    open(os.path.join(tmp, name), "wb").write(cfg)
    json.dump([{"Config": name, "RepoTags": ["real:env"], "Layers": ["layer.tar"]}],
              open(os.path.join(tmp, "manifest.json"), "w"))
    subprocess.run(["tar", "-C", tmp, "-cf", out, "manifest.json", name, "layer.tar"], check=True)
PY
}
# TIME=1: each scan under /usr/bin/time (wall, CPU, peak RSS on stderr); IMGCHECK_PROFILE=1
# adds imgcheck's own stage timings (--profile).
timed() {
  if [ -n "${TIME:-}" ]; then
    /usr/bin/time -f "time: %e s wall, %U s user, %S s system, %M KiB peak RSS" "$@"
  else
    "$@"
  fi
}
# scan NAME EXPECT [FLAGS]: the root $work/NAME as a dir: image. CATALOG=1 adds the frameworks
# `imgcheck catalog` finds there and its count of CUDA libraries (what the scan judged).
scan() {
  echo "== $1: expect $2"
  timed "$imgcheck" scan --no-cache "dir:$work/$1" --fail-on none ${3:-} || true
  if [ -n "${CATALOG:-}" ]; then
    "$imgcheck" catalog -q "dir:$work/$1" >"$work/catalog.txt" || true
    grep '^framework' "$work/catalog.txt" || true
    echo "cuda-library rows: $(grep -c '^cuda-library' "$work/catalog.txt")"
  fi
  echo
}
# scan_env NAME LABEL EXPECT ENV...: the root $work/NAME as a docker-archive whose
# configuration sets ENV (KEY=VALUE words), scanned as LABEL; the root is removed.
scan_env() {
  name=$1 label=$2 expect=$3; shift 3
  archive "$work/$name" "$work/$label.tar" "$@"
  rm -rf "${work:?}/${name:?}"
  echo "== $label: expect $expect"
  timed "$imgcheck" scan --no-cache "docker-archive:$work/$label.tar" --fail-on none || true
  echo
  rm -f "$work/$label.tar"
}
# unbound ROOT LIB: the oracle for IC013: this machine's glibc relocating LIB of ROOT's
# site-packages with every symbol bound now (ldd -r: LD_BIND_NOW, no constructor runs), its
# undefined symbols but the interpreter's (Py*, _Py*: the importing python3 has them).
unbound() {
  echo "-- ldd -r $2:"
  ldd -r "$1/$site/$2" 2>&1 | grep 'undefined symbol' | grep -v 'symbol: _\?Py' | head -n 5
  echo "   ($(ldd -r "$1/$site/$2" 2>&1 | grep 'undefined symbol' | grep -vc 'symbol: _\?Py') undefined)"
}

# 1. The machine's CUDA toolkit as its wheels lay it out (nvidia/cu13/..., nvidia/cudnn/...; the
#    RECORDs of /usr/local/cuda/dist-info): a working stack, so no error and no warning.
if ! want toolkit; then
  :
elif [ -d /usr/local/cuda/dist-info ]; then
  root="$work/toolkit"
  mkdir -p "$root/$site"
  for info in /usr/local/cuda/dist-info/*.dist-info; do
    cp -r "$info" "$root/$site/"
    cut -d, -f1 "$info/RECORD" | while read -r f; do
      case "$f" in nvidia/*/*) ;; *) continue ;; esac
      rest=${f#nvidia/}
      src="/usr/local/cuda/${rest#*/}"
      [ -f "$src" ] || continue
      mkdir -p "$root/$site/$(dirname "$f")"
      ln "$src" "$root/$site/$f" 2>/dev/null || cp "$src" "$root/$site/$f"
    done
  done
  scan toolkit "0 errors, 0 warnings"
  scan toolkit "no IC040 on Hopper (release libraries judged by CUDA 13's SM range)" "--gpu H100"

  # 1b. CuPy 14 for CUDA 13 over those wheels: its extension modules NEED libcufft.so.12,
  #     libcublas.so.13, ... with no RUNPATH; CuPy loads them first through cuda-pathfinder
  #     (dlopen.json preload), so 0 errors and 0 warnings.
  fetch cupy-cuda13x==14.2.0
  cp -al "$root" "$work/cupy" 2>/dev/null || cp -r "$root" "$work/cupy"
  install "$work/cupy" "$(wheel cupy_cuda13x-14.2.0)"
  scan cupy "0 errors, 0 warnings (no IC012 on cupy/cuda/cufft*.so)" "--gpu H100"

  # 1c'. cupy-cuda13x[ctk] without NCCL: the [ctk] extra installs the toolkit's wheels but not
  #      NCCL, which CuPy loads only when NCCL is used (dlopen.json optional): info, no error.
  cp -al "$work/cupy" "$work/cupy-nonccl" 2>/dev/null || cp -r "$work/cupy" "$work/cupy-nonccl"
  rm -rf "$work/cupy-nonccl/$site"/nvidia_nccl_cu13-*.dist-info \
    "$work/cupy-nonccl/$site"/nvidia/cu13/lib/libnccl* "$work/cupy-nonccl/$site/nvidia/nccl"
  scan cupy-nonccl "0 errors, 0 warnings; IC012 info: cupy_backends/cuda/libs/nccl needs libnccl.so.2 (optional)" "--gpu H100"
  rm -rf "$work/cupy-nonccl"
else
  echo "== toolkit: SKIPPED: needs /usr/local/cuda with its wheels' dist-info"
fi

# 1c. A dpkg cuDNN from the machine's real libraries: layer 0 installs libcudnn.so.9 and
#     libcudnn_graph.so.9 as libcudnn9-cuda-13 (status, list, md5sums by MD5 of the real files);
#     layer 1 copies another real library (libcudnn_ops.so.9) over the graph library ("bad") or
#     the same file again ("same"). Expect IC015 and IC004 on "bad" naming both layers, neither
#     on "same" (IC012 warnings for the sub-libraries this partial install lacks).
if ! want deb; then
  :
elif [ -f /usr/local/cuda/lib/libcudnn_graph.so.9 ]; then
  python3 - "$work" /usr/local/cuda/lib <<'PY'
import hashlib, io, json, os, subprocess, sys, tarfile
work, lib = sys.argv[1], sys.argv[2] + "/"
d = "usr/lib/x86_64-linux-gnu/"
def md5(p): return hashlib.md5(open(p, "rb").read()).hexdigest()
def layer(name, files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for arc, src in files:
            if isinstance(src, bytes):
                ti = tarfile.TarInfo(arc); ti.size = len(src); ti.mode = 0o644
                t.addfile(ti, io.BytesIO(src))
            else:
                t.add(src, arcname=arc)
    open(name, "wb").write(buf.getvalue())
    return "sha256:" + hashlib.sha256(buf.getvalue()).hexdigest()
real = [("libcudnn.so.9", "libcudnn.so.9.19.0"), ("libcudnn_graph.so.9", "libcudnn_graph.so.9.19.0")]
files = [("var/lib/dpkg/status", b"Package: libcudnn9-cuda-13\nStatus: install ok installed\n"
          b"Version: 9.19.0.56-1\nArchitecture: amd64\n"),
         ("var/lib/dpkg/info/libcudnn9-cuda-13.list",
          "".join("/" + d + t + "\n" for _, t in real).encode()),
         ("var/lib/dpkg/info/libcudnn9-cuda-13.md5sums",
          "".join(md5(lib + s) + "  " + d + t + "\n" for s, t in real).encode())]
files += [(d + t, lib + s) for s, t in real]
for variant, later in (("bad", "libcudnn_ops.so.9"), ("same", "libcudnn_graph.so.9")):
    out = os.path.join(work, "deb-" + variant)
    os.makedirs(out)
    os.chdir(out)
    ids = [layer("l0.tar", files), layer("l1.tar", [(d + "libcudnn_graph.so.9.19.0", lib + later)])]
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                      "rootfs": {"type": "layers", "diff_ids": ids},
                      "history": [{"created_by": "RUN apt-get install libcudnn9-cuda-13"},
                                  {"created_by": "COPY " + later + " /" + d}]}).encode()
    name = hashlib.sha256(cfg).hexdigest() + ".json"
    open(name, "wb").write(cfg)
    json.dump([{"Config": name, "RepoTags": ["deb:" + variant], "Layers": ["l0.tar", "l1.tar"]}],
              open("manifest.json", "w"))
    subprocess.run(["tar", "cf", out + ".tar", "manifest.json", name, "l0.tar", "l1.tar"], check=True)
PY
  for v in bad same; do
    echo "== deb-$v: expect $( [ $v = bad ] && echo "IC015 and IC004" || echo "no IC015, no IC004")"
    "$imgcheck" scan --no-cache "docker-archive:$work/deb-$v.tar" --fail-on none || true
    echo
  done
else
  echo "== deb: SKIPPED: needs /usr/local/cuda/lib/libcudnn_graph.so.9"
fi

if want ort; then
# 2. onnxruntime-gpu 1.19.0 alone (no build_and_package_info.py): its CUDA provider NEEDS cuDNN 9
#    and the CUDA 12 libraries, none installed: errors naming onnxruntime-gpu 1.19.0.
fetch onnxruntime-gpu==1.19.0
install "$work/ort" "$(wheel onnxruntime_gpu-1.19.0)"
scan ort "IC012 errors for libonnxruntime_providers_cuda.so (onnxruntime-gpu 1.19.0)"

# 3. onnxruntime-gpu 1.19.0 with the CUDA 12 runtime and cuFFT wheels: its providers' RUNPATH is
#    /usr/local/cuda-12.2/lib and 1.19 has no preload_dlls, so the wheels are not reached and
#    the errors stay (the user must set LD_LIBRARY_PATH).
for w in nvidia-cuda-runtime-cu12==12.4.127 nvidia-cufft-cu12==11.2.1.3; do fetch "$w"; done
install "$work/ort-partial" "$(wheel onnxruntime_gpu-1.19.0)" \
  "$(wheel nvidia_cuda_runtime_cu12-12.4.127)" "$(wheel nvidia_cufft_cu12-11.2.1.3)"
scan ort-partial "the same IC012 errors as without the wheels"

# 4. The jax CUDA 12 plugin 0.6.0, recognised by its dist (it has a version.py too), with the
#    CUDA runtime wheel.
fetch jax-cuda12-plugin==0.6.0
install "$work/jax" "$(wheel jax_cuda12_plugin-0.6.0)" "$(wheel nvidia_cuda_runtime_cu12-12.4.127)"
scan jax "no error from the plugin's extension modules"
fi

# 5. torch 2.1.2 (cu121 from PyPI) with the nvidia-* wheels its METADATA pins: a working stack
#    (`import torch` works). Its libtorch_global_deps.so resolves through its RUNPATH, so torch
#    preloads nothing (dlopen.json preload, unless_loads). Expect no error and no warning;
#    torch/bin/nvfuser_tests, a test binary whose RPATH misses libtorch.so, is info "not
#    runnable as shipped".
# The CUDA 12.1 wheels torch 2.1 to 2.4 pin alike (nvjitlink: cuSPARSE's dependency).
cu121="nvidia-cublas-cu12==12.1.3.1 nvidia-cuda-runtime-cu12==12.1.105
  nvidia-cuda-nvrtc-cu12==12.1.105 nvidia-cuda-cupti-cu12==12.1.105 nvidia-cufft-cu12==11.0.2.54
  nvidia-curand-cu12==10.3.2.106 nvidia-cusolver-cu12==11.4.5.107
  nvidia-cusparse-cu12==12.1.0.106 nvidia-nvtx-cu12==12.1.105 nvidia-nvjitlink-cu12==12.3.101"
if want torch; then
  # shellcheck disable=SC2086 # one pin per word
  stack "$work/torch" torch==2.1.2 nvidia-cudnn-cu12==8.9.2.26 nvidia-nccl-cu12==2.18.1 $cu121
  scan torch "0 errors, 0 warnings; info: torch/bin/nvfuser_tests not runnable as shipped"
  rm -rf "$work/torch"
fi

# 6. torch 2.4.0 with the wheels its METADATA pins (cuDNN 9.1.0.70, NCCL 2.20.5): a working
#    stack, so no error and no warning (every symbol of every link map binds).
if want torch24; then
  t24="$work/torch24"
  # shellcheck disable=SC2086 # one pin per word
  stack "$t24" torch==2.4.0 nvidia-cudnn-cu12==9.1.0.70 nvidia-nccl-cu12==2.20.5 $cu121
  scan torch24 "0 errors, 0 warnings"

  # 6b. The same with nvidia-nccl-cu12 downgraded to 2.18.1 (pip install nvidia-nccl-cu12==2.18.1
  #     after torch): `import torch` fails with libtorch_cuda.so: undefined symbol:
  #     ncclCommRegister. Expect IC013 naming libtorch_cuda.so, ncclCommRegister, NCCL 2.18.1 and
  #     torch's pin 2.20.5.
  cp -al "$t24" "$work/torch24-nccl"
  rm -rf "$work/torch24-nccl/$site"/nvidia_nccl_cu12-*.dist-info "$work/torch24-nccl/$site/nvidia/nccl"
  stack "$work/torch24-nccl" nvidia-nccl-cu12==2.18.1
  scan torch24-nccl "IC013: libtorch_cuda.so needs ncclCommRegister (NCCL 2.18.1; torch pins 2.20.5)"
  rm -rf "$work/torch24-nccl"

  # 6c. ctranslate2 4.5.0 (faster-whisper's engine) over it: its auditwheel-vendored
  #     ctranslate2.libs/libcudnn-<hash>.so.9.1.0 dlopens cuDNN's sub-libraries by name, which
  #     neither its RPATH nor anything else of its search reaches (torch's RUNPATH is torch's).
  #     Expect IC012 errors for libcudnn_graph.so.9 ... naming ctranslate2 4.5.0.
  cp -al "$t24" "$work/ct2"
  stack "$work/ct2" ctranslate2==4.5.0
  scan ct2 "IC012 errors: cuDNN sub-libraries of ctranslate2.libs/libcudnn-*.so.9.1.0 (ctranslate2 4.5.0)"
  #     With faster-whisper's documented LD_LIBRARY_PATH (the nvidia cublas and cudnn wheels'
  #     lib directories, README "GPU" section): no error.
  lib="/$site/nvidia"
  scan_env ct2 ct2-env "no error" "LD_LIBRARY_PATH=$lib/cublas/lib:$lib/cudnn/lib"
  rm -rf "$t24"
fi

# 7. torch 2.5.1 with the wheels its METADATA pins (the CUDA 12.4 stack, cuDNN 9.1.0.70, NCCL
#    2.21.5; triton, which `import torch` does not load, left out): 0 errors, 0 warnings.
if want torch25; then
  fetch torch==2.5.1
  # shellcheck disable=SC2046 # one pin per word
  stack "$work/torch25" torch==2.5.1 $(pins "$(wheel torch-2.5.1)")
  scan torch25 "0 errors, 0 warnings"
  rm -rf "$work/torch25"
fi

# 8. tensorflow[and-cuda] 2.15.1, 2.16.2, 2.17.1, 2.18.0: each with the nvidia-* wheels its
#    and-cuda extra pins (TF dlopens them, dlopen.json). 0 errors, 0 warnings.
for v in 2.15.1 2.16.2 2.17.1 2.18.0; do
  case=tf$(echo "$v" | cut -d. -f1,2 | tr -d .)
  want "$case" || continue
  fetch tensorflow=="$v"
  # shellcheck disable=SC2046 # one pin per word
  stack "$work/$case" tensorflow=="$v" $(pins "$(wheel tensorflow-"$v")" and-cuda)
  scan "$case" "0 errors, 0 warnings (tensorflow[and-cuda]==$v)"
  unbound "$work/$case" tensorflow/python/_pywrap_tensorflow_internal.so
  if [ "$case" = tf218 ] && want tf218-mixed; then
    # 8b. TF 2.18 with TF 2.17.1's libtensorflow_framework.so.2 copied over its own (two TF
    #     releases' files mixed): TF's own C++ symbols no longer bind, as `ldd -r` shows.
    #     Expect IC013 naming TF's libraries and the missing C++ symbols.
    fetch tensorflow==2.17.1
    mixed="$work/tf218-mixed" f=tensorflow/libtensorflow_framework.so.2
    cp -al "$work/$case" "$mixed"
    rm "$mixed/$site/$f"
    python3 -c 'import sys, zipfile; open(sys.argv[3], "wb").write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
      "$(wheel tensorflow-2.17.1)" "$f" "$mixed/$site/$f"
    scan tf218-mixed "IC013: TF 2.18's libraries need C++ symbols TF 2.17.1's framework lacks"
    unbound "$mixed" tensorflow/python/_pywrap_tensorflow_internal.so
    rm -rf "$mixed"
  fi
  rm -rf "${work:?}/${case:?}"
done

# 9. jax 0.5.3's CUDA plugin and PJRT plugin with jaxlib and the nvidia-* wheels of its
#    with-cuda extra. That extra gives lower bounds only; the set below meets each (the CUDA
#    12.5 wheels tensorflow 2.18 pins, cuDNN 9.3, NCCL 2.21.5, and nvcc 12.6.85, jax's minimum):
#    0 errors, 0 warnings.
if want jax05; then
  # shellcheck disable=SC2046 # one pin per word
  stack "$work/jax05" jaxlib==0.5.3 jax-cuda12-plugin==0.5.3 jax-cuda12-pjrt==0.5.3 \
    $(pins "$(wheel tensorflow-2.18.0)" and-cuda | grep -v nvcc) nvidia-cuda-nvcc-cu12==12.6.85
  scan jax05 "0 errors, 0 warnings"
  rm -rf "$work/jax05"
fi

# 10. onnxruntime-gpu 1.19.0 with the CUDA 12 and cuDNN 9 wheels its CUDA provider NEEDS (those
#     torch 2.5.1 pins) and, as ONNX Runtime's install guide says for 1.19 (no preload_dlls yet),
#     LD_LIBRARY_PATH naming their lib directories: 0 errors, 0 warnings.
if want ort-cudnn9; then
  fetch onnxruntime-gpu==1.19.0
  stack "$work/ort9" onnxruntime-gpu==1.19.0 nvidia-cuda-runtime-cu12==12.4.127 \
    nvidia-cublas-cu12==12.4.5.8 nvidia-cufft-cu12==11.2.1.3 nvidia-curand-cu12==10.3.5.147 \
    nvidia-cudnn-cu12==9.1.0.70 nvidia-nvjitlink-cu12==12.4.127
  lib="/$site/nvidia"
  scan_env ort9 ort-cudnn9 "0 errors, 0 warnings; info: the TensorRT provider (optional)" \
    "LD_LIBRARY_PATH=$lib/cuda_runtime/lib:$lib/cublas/lib:$lib/cufft/lib:$lib/curand/lib:$lib/cudnn/lib:$lib/nvjitlink/lib"
fi
