#!/usr/bin/env python3
"""Writes the benchmark's reference image: an OCI layout of three gzip layers.

    make_reference.py OUT_DIR [SOURCE_DIR]

SOURCE_DIR (default /usr/local/cuda/lib) is packed under /usr/local/cuda/lib64 in the image,
split like a CUDA image: layer 0 cuBLAS, layer 1 cuDNN, layer 2 everything else. Symlinks stay
symlinks (as in NVIDIA's images: libcudnn.so -> libcudnn.so.9), so the bytes are the real
libraries once. Layers are gzip -6 -n, as `docker push` writes them.

Without SOURCE_DIR on the machine, a synthetic tree of the same shape and size is generated:
ELF-headed files whose bodies mix random and repetitive blocks so that gzip shrinks them about
as much as the real libraries (to roughly 45 %).

Only for the benchmark: the image is written once and reused (see bench/run.sh).
"""
import hashlib
import json
import os
import random
import struct
import subprocess
import sys
import tarfile
import tempfile

PREFIX = "usr/local/cuda/lib64"
LAYERS = [
    ("cublas", "COPY cuBLAS /usr/local/cuda/lib64/", lambda n: n.startswith(("libcublas", "libnvblas"))),
    ("cudnn", "COPY cuDNN /usr/local/cuda/lib64/", lambda n: n.startswith("libcudnn")),
    ("rest", "COPY CUDA runtime libraries /usr/local/cuda/lib64/", lambda n: True),
]

# Synthetic stand-ins: (name, size in MB), about the shape of CUDA 13 + cuDNN 9.
SYNTHETIC = [
    ("libcublasLt.so.13", 540), ("libcublas.so.13", 54), ("libnvblas.so.13", 1),
    ("libcudnn_engines_precompiled.so.9", 245), ("libcudnn_adv.so.9", 109),
    ("libcudnn_heuristic.so.9", 61), ("libcudnn_ops.so.9", 40),
    ("libcudnn_engines_runtime_compiled.so.9", 29), ("libcudnn_graph.so.9", 4),
    ("libcudnn_cnn.so.9", 4), ("libcudnn.so.9", 1),
    ("libcufft.so.12", 287), ("libnccl.so.2", 218), ("libcusparse.so.12", 163),
    ("libcusolver.so.12", 141), ("libcurand.so.10", 133), ("libnvrtc.so.13", 109),
    ("libnvrtc.alt.so.13", 110), ("libcusolverMg.so.12", 104), ("libnvJitLink.so.13", 99),
    ("libnvvm.so.4", 63), ("libnvperf_host.so", 32), ("libcudart.so.13", 1),
]


def elf_header():
    # ELF64 little-endian x86-64 ET_DYN header with no program or section headers.
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0)


def make_synthetic(root):
    rng = random.Random(20261121)
    table = bytes(rng.randrange(256) for _ in range(4096))
    for name, mb in SYNTHETIC:
        path = os.path.join(root, name)
        with open(path, "wb") as f:
            f.write(elf_header())
            for _ in range(mb * 16):  # 64 KiB blocks: 45 % random, the rest repetitive
                if rng.random() < 0.45:
                    f.write(os.urandom(65536))
                else:
                    f.write(table * 16)
        base = name.split(".so")[0] + ".so"
        os.symlink(name, os.path.join(root, base))


def add_tree(tar, src, names):
    for d in ("usr", "usr/local", "usr/local/cuda", PREFIX):
        info = tarfile.TarInfo(d)
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
        tar.addfile(info)
    for name in names:
        host = os.path.join(src, name)
        for dirpath, dirnames, filenames in (os.walk(host) if os.path.isdir(host) and not os.path.islink(host)
                                             else [(src, [], [name])]):
            dirnames.sort()
            rel_dir = os.path.relpath(dirpath, src)
            if rel_dir != ".":
                info = tar.gettarinfo(dirpath, os.path.join(PREFIX, rel_dir))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                tar.addfile(info)
            for fn in sorted(filenames):
                p = os.path.join(dirpath, fn)
                arc = os.path.normpath(os.path.join(PREFIX, rel_dir, fn))
                info = tar.gettarinfo(p, arc)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if info.isreg():
                    with open(p, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)


class HashingPipe:
    """File-like: hashes what tarfile writes and passes it to gzip's stdin."""

    def __init__(self, out):
        self.out, self.sha, self.size = out, hashlib.sha256(), 0

    def write(self, b):
        self.sha.update(b)
        self.size += len(b)
        self.out.write(b)
        return len(b)


def write_layer(src, names, blobs):
    tmp = os.path.join(blobs, "layer.tmp")
    with open(tmp, "wb") as out:
        gz = subprocess.Popen(["gzip", "-6", "-n", "-c"], stdin=subprocess.PIPE, stdout=out)
        pipe = HashingPipe(gz.stdin)
        with tarfile.open(fileobj=pipe, mode="w|", format=tarfile.PAX_FORMAT, bufsize=1 << 20) as tar:
            add_tree(tar, src, names)
        gz.stdin.close()
        if gz.wait() != 0:
            sys.exit("gzip failed")
    return finish_blob(tmp, blobs), "sha256:" + pipe.sha.hexdigest()


def finish_blob(tmp, blobs):
    sha = hashlib.sha256()
    with open(tmp, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            sha.update(chunk)
    size = os.path.getsize(tmp)
    os.rename(tmp, os.path.join(blobs, sha.hexdigest()))
    return "sha256:" + sha.hexdigest(), size


def write_json_blob(obj, blobs):
    data = json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()
    hexd = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, hexd), "wb") as f:
        f.write(data)
    return "sha256:" + hexd, len(data)


def main():
    out = sys.argv[1]
    src = sys.argv[2] if len(sys.argv) > 2 else "/usr/local/cuda/lib"
    blobs = os.path.join(out, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)
    synthetic = None
    if not os.path.isdir(src):
        synthetic = tempfile.TemporaryDirectory(dir=out)
        src = synthetic.name
        print(f"{sys.argv[2] if len(sys.argv) > 2 else '/usr/local/cuda/lib'} absent: "
              "writing a synthetic tree of the same size", file=sys.stderr)
        make_synthetic(src)
    remaining = sorted(os.listdir(src))
    layers, history = [], []
    for label, created_by, wanted in LAYERS:
        names = [n for n in remaining if wanted(n)]
        remaining = [n for n in remaining if n not in names]
        (digest, size), diff_id = write_layer(src, names, blobs)
        layers.append((digest, size, diff_id))
        history.append({"created": "1970-01-01T00:00:00Z", "created_by": created_by})
        print(f"layer {label}: {size} bytes compressed, {len(names)} names", file=sys.stderr)
    config = {
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/usr/local/cuda/bin:/usr/bin:/bin",
                           "LD_LIBRARY_PATH=/usr/local/cuda/lib64"]},
        "rootfs": {"type": "layers", "diff_ids": [l[2] for l in layers]},
        "history": history,
    }
    cdigest, csize = write_json_blob(config, blobs)
    manifest = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdigest, "size": csize},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": s}
                   for d, s, _ in layers],
    }
    mdigest, msize = write_json_blob(manifest, blobs)
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mdigest,
                            "size": msize, "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    with open(os.path.join(out, "layers.txt"), "w") as f:  # blob paths in the layout, bottom first
        for d, _, _ in layers:
            f.write(f"blobs/sha256/{d.split(':')[1]}\n")


if __name__ == "__main__":
    main()
