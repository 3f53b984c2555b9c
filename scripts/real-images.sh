#!/bin/sh
# Builds images from real files and scans them: NVIDIA's wheels, framework wheels and this
# machine's CUDA toolkit, laid out as pip installs them (site-packages, dist-info with RECORD).
# Outside the test suite: it downloads (pip download --no-deps, cached in .whl/).
#   scripts/real-images.sh [build-dir]      (default: build)
# Prints each scan's text report; the expectations are stated before each scan.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
imgcheck="$top/${1:-build}/imgcheck"
cache="$top/.whl"
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
scan() {
  echo "== $1: expect $2"
  "$imgcheck" scan --no-cache "dir:$work/$1" --fail-on none ${3:-} || true
  echo
}

# 1. The machine's CUDA toolkit as its wheels lay it out (nvidia/cu13/..., nvidia/cudnn/...; the
#    RECORDs of /usr/local/cuda/dist-info): a working stack, so no error and no warning.
if [ -d /usr/local/cuda/dist-info ]; then
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
else
  echo "== toolkit: SKIPPED: needs /usr/local/cuda with its wheels' dist-info"
fi

# 1c. A dpkg cuDNN from the machine's real libraries: layer 0 installs libcudnn.so.9 and
#     libcudnn_graph.so.9 as libcudnn9-cuda-13 (status, list, md5sums by MD5 of the real files);
#     layer 1 copies another real library (libcudnn_ops.so.9) over the graph library ("bad") or
#     the same file again ("same"). Expect IC015 and IC004 on "bad" naming both layers, neither
#     on "same" (IC012 warnings for the sub-libraries this partial install lacks).
if [ -f /usr/local/cuda/lib/libcudnn_graph.so.9 ]; then
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

# 5. torch 2.1.2 (cu121 from PyPI) with the nvidia-* wheels its METADATA pins: a working stack
#    (`import torch` works). Its libtorch_global_deps.so resolves through its RUNPATH, so torch
#    preloads nothing (dlopen.json preload, unless_loads). Expect no error and no warning;
#    torch/bin/nvfuser_tests, a test binary whose RPATH misses libtorch.so, is info "not
#    runnable as shipped".
torch_pins="torch==2.1.2 nvidia-cudnn-cu12==8.9.2.26 nvidia-cublas-cu12==12.1.3.1
  nvidia-cuda-runtime-cu12==12.1.105 nvidia-cuda-nvrtc-cu12==12.1.105
  nvidia-cuda-cupti-cu12==12.1.105 nvidia-cufft-cu12==11.0.2.54 nvidia-curand-cu12==10.3.2.106
  nvidia-cusolver-cu12==11.4.5.107 nvidia-cusparse-cu12==12.1.0.106 nvidia-nccl-cu12==2.18.1
  nvidia-nvtx-cu12==12.1.105 nvidia-nvjitlink-cu12==12.3.101"
wheels=""
for pin in $torch_pins; do
  fetch "$pin"
  name=$(echo "${pin%%==*}" | tr - _)
  wheels="$wheels $(wheel "$name-${pin#*==}")"
done
# shellcheck disable=SC2086 # one wheel per word
install "$work/torch" $wheels
scan torch "0 errors, 0 warnings; info: torch/bin/nvfuser_tests not runnable as shipped"
rm -rf "$work/torch"
