#!/usr/bin/env python3
"""Regenerates imgcheck's framework tables from the real release artifacts on PyPI.

A maintainer tool, run by hand (never by the test suite):

    tools/rules_from_artifacts.py [--cache DIR] [--rules DIR] [--only torch,tensorflow,...]

(--only takes torch, tensorflow, jax, onnxruntime, cupy, cudnn, cuda and wheels: the shared
objects of every nvidia-* wheel family, rules/libraries.json's wheel_libraries table.)

It lists each project's releases with PyPI's JSON API, reads each release's Linux x86-64 wheel
and rewrites the tables of rules/frameworks.json (and cuDNN's sub-library sets in
libraries.json) in a stable order, so a refresh is a readable diff. Every generated row names its
artifact (wheel file name and sha256) in `source`.

Reading a wheel: only the members a table needs are fetched, with HTTP range requests on the
wheel's URL (the zip central directory, then each member), CRC-checked, and cached under
CACHE/members/<wheel sha256>/. A wheel already downloaded whole into CACHE (pip download
--no-deps -d CACHE) is read locally instead, after checking its sha256. The sha256 named in a
row is PyPI's digest of the whole file; member CRCs tie the bytes read to the zip's directory.

Standard library only.
"""

import argparse
import io
import hashlib
import json
import os
import re
import struct
import sys
import urllib.error
import urllib.parse
import urllib.request
import zipfile
import zlib

PYPI = "https://pypi.org/pypi/{}/json"
NEWEST = [""]  # upload date of the newest artifact a row was read from

# ---------------------------------------------------------------------------------------------
# Parsing (pure functions: tools/test_rules_from_artifacts.py runs them on wheels it builds).


def version_key(v):
    """Sort key of a release version: numeric components, pre-releases sort before."""
    parts = []
    for p in re.split(r"[.+]", v):
        m = re.match(r"(\d+)(.*)", p)
        parts.append((int(m.group(1)), m.group(2)) if m else (-1, p))
    return parts


def is_final(v):
    return re.fullmatch(r"\d+(\.\d+)*", v) is not None


def parse_requires(metadata_text):
    """METADATA's Requires-Dist lines -> [(name, specifier, marker)] (PEP 508, the forms
    wheels use: `name (==1.2) ; marker` and `name==1.2; marker`)."""
    out = []
    for line in metadata_text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line[len("Requires-Dist:"):].strip()
        req, _, marker = req.partition(";")
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?([^)]*)\)?", req)
        if m:
            out.append((m.group(1).lower().replace("_", "-"), m.group(2).strip(), marker.strip()))
    return out


def pin_of(spec):
    """'==9.1.0.70' -> '9.1.0.70'; None when the specifier is not an exact pin."""
    m = re.fullmatch(r"==\s*([0-9][0-9.]*?)(\.\*)?", spec.strip())
    return m.group(1) if m else None


def bounds_of(spec):
    """'<10.0,>=9.8' -> ('9.8', '10.0'): the lower (>=, ==) and upper (<, <=) bounds."""
    lo = hi = None
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(>=|==|<=|<|~=)\s*([0-9][0-9.]*)\s*", part)
        if not m:
            continue
        if m.group(1) in (">=", "==", "~="):
            lo = m.group(2)
        if m.group(1) in ("<", "<=", "=="):
            hi = m.group(2)
    return lo, hi


def parse_python_assignments(text):
    """The string constants a generated Python file assigns at top level (`cuda = '12.4'`,
    `cuda_version_number = "10.1"`) and the keys of a `build_info = {...}` dict, as str."""
    out = {}
    for m in re.finditer(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*[A-Za-z_\[\]]+\s*)?=\s*['\"]([^'\"]*)['\"]",
                         text, re.M):
        out[m.group(1)] = m.group(2)
    for m in re.finditer(r"['\"]([A-Za-z_]+)['\"]\s*[:,]\s*['\"]([^'\"]*)['\"]", text):
        out.setdefault(m.group(1), m.group(2))
    return out


def elf_needed(data):
    """DT_NEEDED names of an ELF64 little-endian shared object's bytes (enough of its start to
    hold the dynamic segment and string table); [] for anything else."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    loads, dyn = [], None
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 56 > len(data):
            return []
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, off)
        if p_type == 1:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:
            dyn = (p_offset, p_filesz)
    if not dyn:
        return []

    def to_offset(vaddr):
        for v, o, sz in loads:
            if v <= vaddr < v + sz:
                return vaddr - v + o
        return None

    entries, strtab = [], None
    for off in range(dyn[0], min(dyn[0] + dyn[1], len(data) - 15), 16):
        tag, val = struct.unpack_from("<qQ", data, off)
        if tag == 0:
            break
        if tag == 1:
            entries.append(val)
        elif tag == 5:
            strtab = to_offset(val)
    if strtab is None:
        return []
    names = []
    for e in entries:
        start = strtab + e
        end = data.find(b"\0", start)
        if start >= len(data) or end < 0:
            continue
        names.append(data[start:end].decode("ascii", "replace"))
    return names


def elf_dynamic_end(head):
    """The file offset where an ELF64 little-endian object's dynamic segment ends, from its
    first bytes (header and program headers); None when `head` does not say."""
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    phoff, = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 56 > len(head):
            return None
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", head, off)
        if p_type == 2:
            return p_offset + p_filesz
    return None


def returned_constants(data, lo, hi):
    """Sorted set of the 32-bit immediates with lo <= imm <= hi in `mov eax, imm32; ret`
    (b8 imm32 c3) and `mov edi, imm32; call/jmp` (bf imm32 e8/e9) sequences: how
    `int f() { return CUDNN_VERSION; }` and a binding's `return PyLong_FromLong(CUDNN_VERSION)`
    compile on x86-64."""
    found = set()
    for m in re.finditer(rb"(?:\xb8(....)\xc3|\xbf(....)[\xe8\xe9])", data, re.S):
        v, = struct.unpack("<I", m.group(1) or m.group(2))
        if lo <= v <= hi:
            found.add(v)
    return sorted(found)


def cudnn_sublibraries(names):
    """Base names of libcudnn_*.so.N files in a wheel's member list, by major: {'9': [...]}."""
    out = {}
    for n in names:
        m = re.search(r"/(libcudnn_[a-z_]+)\.so\.(\d+)$", n)
        if m and "static" not in m.group(1):
            out.setdefault(m.group(2), set()).add(m.group(1))
    return {k: sorted(v) for k, v in out.items()}


def wheel_libraries(names):
    """Shared objects in a wheel's member list, by directory: {dir: [file names]} of members
    named lib<name>.so or lib<name>.so.<version> (Python extension modules are not libraries a
    DT_NEEDED names; static archives and headers are not shared objects)."""
    out = {}
    for n in names:
        d, _, f = n.rpartition("/")
        if re.fullmatch(r"lib[^/.]+\.so(\.\d+)*", f):
            out.setdefault(d, set()).add(f)
    return {d: sorted(fs) for d, fs in sorted(out.items())}


def version_line(filename):
    """The version line a library file name's version belongs to: 'calendar' for NVIDIA's
    year-numbered releases (CUPTI's libcupti.so.2024.1.0), '' for the component line."""
    m = re.search(r"\.so\.(\d+)(\.\d+)*$", filename)
    return "calendar" if m and re.fullmatch(r"20\d\d", m.group(1)) else ""


def family_base(project):
    """A wheel family's name without its CUDA major: 'nvidia-cublas-cu12' -> 'nvidia-cublas'."""
    return re.sub(r"-cu\d+$", "", project)


# ---------------------------------------------------------------------------------------------
# Fetching.


class Wheel:
    """One wheel file of a release, read member by member (range requests or a local copy)."""

    def __init__(self, cache, project, info):
        self.filename = info["filename"]
        self.url = urllib.parse.urljoin(PYPI.format(project), info["url"])
        self.sha256 = info["digests"]["sha256"]
        self.size = info["size"]
        self.date = info.get("upload_time", "")[:10]
        self.cache = cache
        self.dir = os.path.join(cache, "members", self.sha256)
        self._zip = None
        self._members = None
        local = os.path.join(cache, self.filename)
        if os.path.exists(local):
            h = hashlib.sha256()
            with open(local, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            if h.hexdigest() != self.sha256:
                sys.exit(f"{local}: sha256 {h.hexdigest()} is not PyPI's {self.sha256}")
            self._zip = zipfile.ZipFile(local)

    def source(self, what):
        NEWEST[0] = max(NEWEST[0], self.date)
        return f"{what} in {self.filename} (sha256 {self.sha256})"

    def _get(self, start, end):
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end - 1}"})
        with urllib.request.urlopen(req, timeout=120) as r:
            data = r.read()
        if len(data) != end - start:
            raise IOError(f"{self.filename}: short range read {start}-{end}")
        return data

    def names(self):
        if self._zip:
            return self._zip.namelist()
        if self._members is None:
            idx = os.path.join(self.dir, ".central")
            if os.path.exists(idx):
                raw = open(idx, "rb").read()
            else:
                tail = self._get(max(0, self.size - 65536 - 22), self.size)
                eocd = tail.rfind(b"PK\x05\x06")
                cd_size, cd_off = struct.unpack_from("<II", tail, eocd + 12)
                if cd_off == 0xFFFFFFFF or cd_size == 0xFFFFFFFF:
                    loc = tail.rfind(b"PK\x06\x07")
                    z64, = struct.unpack_from("<Q", tail, loc + 8)
                    z = self._get(z64, z64 + 56)
                    cd_size, cd_off = struct.unpack_from("<QQ", z, 40)
                raw = self._get(cd_off, cd_off + cd_size)
                os.makedirs(self.dir, exist_ok=True)
                with open(idx + ".tmp", "wb") as f:
                    f.write(raw)
                os.replace(idx + ".tmp", idx)
            self._members = {}
            pos = 0
            while raw[pos:pos + 4] == b"PK\x01\x02":
                (method, crc, csize, usize, nlen, xlen, clen, hoff) = struct.unpack_from(
                    "<H4xIIIHHH8xI", raw, pos + 10)
                name = raw[pos + 46:pos + 46 + nlen].decode()
                extra = raw[pos + 46 + nlen:pos + 46 + nlen + xlen]
                if 0xFFFFFFFF in (csize, usize, hoff):
                    vals, e = [], 0
                    while e + 4 <= len(extra):
                        hid, hl = struct.unpack_from("<HH", extra, e)
                        if hid == 1:
                            vals = list(struct.unpack_from(f"<{hl // 8}Q", extra, e + 4))
                        e += 4 + hl
                    if usize == 0xFFFFFFFF:
                        usize = vals.pop(0)
                    if csize == 0xFFFFFFFF:
                        csize = vals.pop(0)
                    if hoff == 0xFFFFFFFF:
                        hoff = vals.pop(0)
                self._members[name] = (method, crc, csize, usize, hoff)
                pos += 46 + nlen + xlen + clen
        return list(self._members)

    def read(self, name, limit=None):
        """The member's bytes (the first `limit` bytes when given: a prefix, not CRC-checked
        unless it is the whole member); None when the wheel has no such member."""
        if self._zip:
            try:
                with self._zip.open(name) as f:
                    return f.read(limit) if limit else f.read()
            except KeyError:
                return None
        if name not in self.names():
            return None
        path = os.path.join(self.dir, name + (f".{limit}" if limit else ""))
        if os.path.exists(path):
            return open(path, "rb").read()
        method, crc, csize, usize, hoff = self._members[name]
        head = self._get(hoff, hoff + 30)
        nlen, xlen = struct.unpack_from("<HH", head, 26)
        start = hoff + 30 + nlen + xlen
        if method == 0:
            data = self._get(start, start + (min(csize, limit) if limit else csize))
        elif method == 8:
            d = zlib.decompressobj(-15)
            out = bytearray()
            pos = start
            while pos < start + csize and not (limit and len(out) >= limit):
                chunk = self._get(pos, min(pos + (8 << 20), start + csize))
                pos += len(chunk)
                out += d.decompress(chunk)
            data = bytes(out[:limit] if limit else out)
        else:
            raise IOError(f"{self.filename}: {name}: compression method {method}")
        if (not limit or len(data) == usize) and zlib.crc32(data) != crc:
            raise IOError(f"{self.filename}: {name}: CRC mismatch")
        if limit and limit > (16 << 20):
            return data  # a large prefix is read for a fact, which fact() caches
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        return data

    def fact(self, key, compute):
        """compute(), cached in the wheel's member cache under `key` (JSON)."""
        path = os.path.join(self.dir, ".facts.json")
        facts = json.load(open(path)) if os.path.exists(path) else {}
        if key not in facts:
            facts[key] = compute()
            os.makedirs(self.dir, exist_ok=True)
            with open(path + ".tmp", "w") as f:
                json.dump(facts, f)
            os.replace(path + ".tmp", path)
        return facts[key]

    def metadata(self):
        name = next(n for n in self.names() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        return self.read(name).decode("utf-8", "replace")


class PyPI:
    def __init__(self, cache):
        self.cache = cache
        self._projects = {}

    def releases(self, project):
        """{version: [file info]} of the project's final releases, from PyPI's JSON API."""
        if project not in self._projects:
            try:
                with urllib.request.urlopen(PYPI.format(project), timeout=120) as r:
                    self._projects[project] = json.load(r)["releases"]
            except urllib.error.HTTPError as e:
                if e.code != 404:
                    raise
                self._projects[project] = {}  # no such project
        return {v: f for v, f in self._projects[project].items() if is_final(v) and f}

    def wheel(self, project, version, prefer=("cp311", "cp312", "cp310", "cp39", "cp38", "cp37",
                                                "cp36", "py3")):
        """The release's Linux x86-64 wheel for the first Python tag of `prefer` it has."""
        files = [f for f in self.releases(project).get(version, [])
                 if f["filename"].endswith(".whl") and not f.get("yanked")
                 and (("x86_64" in f["filename"] and "linux" in f["filename"])
                      or f["filename"].endswith("-none-any.whl"))]
        for tag in prefer:
            for f in sorted(files, key=lambda f: f["filename"]):
                if f"-{tag}-" in f["filename"] or f"-{tag}." in f["filename"]:
                    return Wheel(self.cache, project, f)
        return None


# ---------------------------------------------------------------------------------------------
# Tables.


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def minor_of(v):
    return ".".join(v.split(".")[:2])


def newest_per_minor(versions, first):
    by_minor = {}
    for v in versions:
        if version_key(v) >= version_key(first):
            m = minor_of(v)
            if m not in by_minor or version_key(v) > version_key(by_minor[m]):
                by_minor[m] = v
    return [by_minor[m] for m in sorted(by_minor, key=version_key, reverse=True)]


def torch_rows(pypi):
    """torch_builds and torch_cudnn_pins rows of each torch minor on PyPI (1.13 on): the
    PyPI wheel's torch/version.py `cuda` and its METADATA nvidia-cudnn pin."""
    builds, pins = [], []
    for v in newest_per_minor(pypi.releases("torch"), "1.13"):
        w = pypi.wheel("torch", v)
        if not w:
            log(f"torch {v}: no Linux x86-64 wheel")
            continue
        log(f"torch {v}: {w.filename}")
        facts = parse_python_assignments(w.read("torch/version.py").decode())
        cudnn = None
        for name, spec, _ in parse_requires(w.metadata()):
            if name.startswith("nvidia-cudnn-cu") and pin_of(spec):
                cudnn = (name, pin_of(spec))
        if not facts.get("cuda") or not cudnn:
            log(f"torch {v}: no CUDA build ({facts.get('cuda')}, {cudnn})")
            continue
        src = w.source(f"torch/version.py cuda = '{facts['cuda']}', METADATA Requires-Dist "
                       f"{cudnn[0]}=={cudnn[1]}")
        builds.append({"torch": minor_of(v), "cuda": facts["cuda"], "cudnn": cudnn[1],
                       "channel": "stable", "source": src})
        pins.append({"variant": f"cu{facts['cuda'].replace('.', '')} (torch {v}, PyPI)",
                     "package": cudnn[0], "cudnn": cudnn[1], "source": src})
    return builds, pins


def tensorflow_rows(pypi, documented):
    """tensorflow_builds rows of each 2.x minor: build_info.py's cuda_version (and cuDNN
    major), the and-cuda extra's nvidia-cudnn pin where it has one; the cuDNN minor of the
    documented tested configuration otherwise (build_info names only the major)."""
    rows = []
    for v in newest_per_minor(pypi.releases("tensorflow"), "2.0"):
        project = "tensorflow-gpu" if v.startswith("2.0.") else "tensorflow"
        w = pypi.wheel(project, v)
        if not w:
            log(f"{project} {v}: no Linux x86-64 wheel")
            continue
        log(f"{project} {v}: {w.filename}")
        info = w.read("tensorflow/python/platform/build_info.py")
        if info is None:  # 2.0 and 2.1 ship the package as tensorflow_core
            info = w.read("tensorflow_core/python/platform/build_info.py")
        if info is None:
            log(f"{project} {v}: no build_info.py")
            continue
        facts = parse_python_assignments(info.decode())
        cuda = facts.get("cuda_version") or facts.get("cuda_version_number")
        cudnn_major = facts.get("cudnn_version") or facts.get("cudnn_version_number")
        if not cuda or not cudnn_major:
            log(f"{project} {v}: build_info without CUDA: {facts}")
            continue
        pin = None
        for name, spec, marker in parse_requires(w.metadata()):
            if name.startswith("nvidia-cudnn-cu") and pin_of(spec):
                pin = pin_of(spec)
        what = f"build_info.py cuda {cuda}, cudnn {cudnn_major}"
        if pin:
            rows.append({"tensorflow": v, "package": project, "cudnn": pin, "cuda": cuda,
                         "source": w.source(what + f", METADATA and-cuda pin nvidia-cudnn=={pin}")})
            continue
        doc = documented.get(minor_of(v))
        cudnn = cudnn_major
        note = ""
        if doc and doc["cudnn"].split(".")[0] == cudnn_major.split(".")[0]:
            cudnn = doc["cudnn"]
            note = "; the cuDNN minor from TensorFlow's tested build configurations " \
                   "(https://www.tensorflow.org/install/source#gpu)"
        if doc and doc["cuda"].startswith(cuda + "."):  # build_info names only the major
            cuda = doc["cuda"]
            note += "; the CUDA minor from the same tested build configurations"
        rows.append({"tensorflow": v, "package": project, "cudnn": cudnn, "cuda": cuda,
                     "source": w.source(what) + note})
    return rows


def jax_rows(pypi, documented):
    """jax_plugins rows, one per plugin release: built_cudnn from the constant
    cudnn_build_version() returns in _versions.so, min/max cuDNN and min CUDA from METADATA's
    with-cuda extra (nvidia-cudnn-cu1x>=A,<B; nvidia-cuda-runtime-cu1x>=C)."""
    rows = []
    for plugin in ("jax-cuda12-plugin", "jax-cuda13-plugin"):
        module = plugin.replace("-", "_")
        fallback = next(r for r in documented if r["plugin"] == plugin and "from" not in r)
        for v in sorted(pypi.releases(plugin), key=version_key, reverse=True):
            w = pypi.wheel(plugin, v)
            if not w:
                continue
            log(f"{plugin} {v}: {w.filename}")
            so = next((n for n in w.names() if re.fullmatch(module + r"/_versions\..*so", n)), None)
            data = w.read(so) if so else b""
            # CUDNN_VERSION: major*10000+minor*100+patch from cuDNN 9, major*1000+... before.
            built = returned_constants(data, 90000, 109999) or returned_constants(data, 8000, 8999)
            reqs = parse_requires(w.metadata())
            min_cudnn = max_cudnn = min_cuda = None
            for name, spec, marker in reqs:
                if name.startswith("nvidia-cudnn-cu"):
                    min_cudnn, max_cudnn = bounds_of(spec)
                if name.startswith("nvidia-cuda-runtime-cu"):
                    min_cuda = bounds_of(spec)[0]
            if len(built) != 1:
                log(f"{plugin} {v}: not read (constants {built}, cudnn pin {min_cudnn})")
                continue
            b = built[0]
            built_cudnn = f"{b // 10000}.{b // 100 % 100}" if b >= 90000 else f"{b // 1000}.{b // 100 % 10}"
            what = f"{so} cudnn_build_version() returns {b}"
            if min_cudnn:
                what += f"; METADATA nvidia-cudnn {min_cudnn}..<{max_cudnn}"
            else:  # no pin: jax accepts a cuDNN at least the one it was built with, same major
                min_cudnn = built_cudnn
                max_cudnn = f"{int(built_cudnn.split('.')[0]) + 1}.0"
                what += f"; no nvidia-cudnn pin: {built_cudnn}..<{max_cudnn} (same major)"
            if min_cuda:
                what += f", nvidia-cuda-runtime >= {min_cuda}"
            row = dict(fallback)
            row.update({"from": v, "to": v, "built_cudnn": built_cudnn, "min_cudnn": min_cudnn,
                        "max_cudnn": max_cudnn or fallback["max_cudnn"],
                        "source": w.source(what) + "; built_cuda, min_sm, min_driver as the "
                        "fallback row (" + fallback["source"] + ")"})
            if min_cuda:
                row["min_cuda"] = ".".join(min_cuda.split(".")[:2])
            row.pop("confirmed", None)
            order = ["plugin", "module", "from", "to", "cuda_major", "built_cuda", "built_cudnn",
                     "min_cuda", "min_cudnn", "max_cudnn", "min_sm", "min_driver", "source"]
            rows.append({k: row[k] for k in order if k in row})
        rows.append(fallback)
    return rows


def onnxruntime_rows(pypi, first="1.13"):
    """onnxruntime_builds rows, one per onnxruntime-gpu release: the CUDA and cuDNN majors of
    libonnxruntime_providers_cuda.so's DT_NEEDED (libcudart.so.12, libcudnn.so.9)."""
    rows = []
    for v in sorted(pypi.releases("onnxruntime-gpu"), key=version_key, reverse=True):
        if version_key(v) < version_key(first):
            continue
        w = pypi.wheel("onnxruntime-gpu", v)
        if not w:
            continue
        name = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
        if name not in w.names():
            log(f"onnxruntime-gpu {v}: no CUDA provider")
            continue
        log(f"onnxruntime-gpu {v}: {w.filename}")

        def needed_of():
            end = elf_dynamic_end(w.read(name, limit=65536))
            return elf_needed(w.read(name, limit=end)) if end else []
        needed = w.fact("needed:" + name, needed_of)
        cudart = [n for n in needed if n.startswith("libcudart.so.")]
        cudnn = [n for n in needed if n.startswith("libcudnn.so.")]
        if not cudart:
            log(f"onnxruntime-gpu {v}: no libcudart in DT_NEEDED: {needed}")
            continue
        cuda_major = int(cudart[0].split(".so.")[1].split(".")[0])
        row = {"from": v, "to": v, "cuda_major": cuda_major}
        if cudnn:
            row["cudnn_major"] = int(cudnn[0].split(".so.")[1].split(".")[0])
        row["source"] = w.source(f"{name} DT_NEEDED {', '.join(cudart + cudnn)}")
        rows.append(row)
    return rows


def cupy_rows(pypi):
    """cupy_packages rows: the CUDA major in .data/_wheel.json of each cupy-cuda1Nx package's
    newest wheel."""
    rows = []
    for pkg in ("cupy-cuda11x", "cupy-cuda12x", "cupy-cuda13x"):
        rel = [v for v in pypi.releases(pkg) if version_key(v) >= version_key("12.0")]
        for v in sorted(rel, key=version_key, reverse=True):
            w = pypi.wheel(pkg, v)
            if not w:
                continue
            info = w.read("cupy/.data/_wheel.json")
            if info is None:
                continue
            cuda = json.loads(info)["cuda"]
            rows.append({"package": pkg, "cuda_major": int(str(cuda).split(".")[0]),
                         "source": w.source(f"cupy/.data/_wheel.json cuda '{cuda}' (cupy {v})")})
            break
    return rows


# The component wheels whose version each CUDA release pins (the libraries the checks compare).
CUDA_COMPONENTS = {"nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cublas", "nvidia-cufft",
                   "nvidia-curand", "nvidia-cusolver", "nvidia-cusparse", "nvidia-nvjitlink",
                   "nvidia-cuda-cupti"}


def cuda_rows(pypi, first="11.0"):
    """cuda_releases rows: every final cuda-toolkit release on PyPI (a metapackage whose
    METADATA pins each component wheel), with the nvidia-cuda-runtime version it pins."""
    rows = []
    for v in sorted(pypi.releases("cuda-toolkit"), key=version_key, reverse=True):
        if version_key(v) < version_key(first):
            continue
        w = pypi.wheel("cuda-toolkit", v, prefer=("py3", "py2.py3"))
        if not w:
            continue
        components = {}
        for name, spec, _ in parse_requires(w.metadata()):
            short = re.sub(r"-cu\d+$", "", name)
            if short in CUDA_COMPONENTS and pin_of(spec):
                components[short] = pin_of(spec)
        row = {"cuda": v}
        if components:
            row["components"] = dict(sorted(components.items()))
        row["source"] = w.source(f"METADATA Version {v}" +
                                 (", the Requires-Dist pins of its component wheels"
                                  if components else ""))
        rows.append(row)
    return rows


def cudnn_sets(pypi):
    """cuDNN's sub-library sets per major, from the newest nvidia-cudnn-cu1x wheel of each."""
    sets, sources = {}, []
    for pkg in ("nvidia-cudnn-cu11", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13"):
        for v in sorted(pypi.releases(pkg), key=version_key, reverse=True):
            w = pypi.wheel(pkg, v, prefer=("py3",))
            if not w:
                continue
            for major, libs in cudnn_sublibraries(w.names()).items():
                if major not in sets:
                    sets[major] = libs
                    sources.append(w.source(f"libcudnn_*.so.{major} members"))
            break
    return sets, sources


# NVIDIA's library wheels that no cuda-toolkit release or torch release names (exact PyPI
# project names: the tool asks PyPI for these and for the names it reads in METADATA, no others).
NVIDIA_LIBRARY_WHEELS = ["nvidia-nvcomp-cu12", "nvidia-cudss-cu12", "nvidia-cusparselt-cu11"]
# Packages that vendor NVIDIA libraries for their own use, read where torch pins them.
VENDORING = ["triton"]


def wheel_library_rows(pypi, first_torch="2.1"):
    """wheel_libraries rows: the shared objects of every nvidia-* wheel project that the newest
    cuda-toolkit release of each CUDA major (11, 12, 13) or a torch release first_torch..newest
    names in its Requires-Dist (plus NVIDIA_LIBRARY_WHEELS): each project's newest release, and
    every release torch pins (directly or through its cuda-toolkit pin), with the packages of
    VENDORING torch pins. One row per wheel directory."""
    projects = set(NVIDIA_LIBRARY_WHEELS)
    wanted = set()  # (project, version)

    def toolkit_pins(version):
        w = pypi.wheel("cuda-toolkit", version, prefer=("py3", "py2.py3"))
        out = set()
        for name, spec, _ in parse_requires(w.metadata()) if w else []:
            if name.startswith("nvidia-"):
                projects.add(name)
                if pin_of(spec):
                    out.add((name, pin_of(spec)))
        return out

    toolkits = sorted(pypi.releases("cuda-toolkit"), key=version_key, reverse=True)
    for major in ("11", "12", "13"):
        newest = next((v for v in toolkits if v.split(".")[0] == major), None)
        if newest:
            toolkit_pins(newest)  # the projects it names
    for v in newest_per_minor(pypi.releases("torch"), first_torch):
        w = pypi.wheel("torch", v)
        if not w:
            continue
        for name, spec, _ in parse_requires(w.metadata()):
            pinned = pin_of(spec)
            if name == "cuda-toolkit" and pinned:
                wanted |= toolkit_pins(pinned)
            elif name.startswith("nvidia-"):
                projects.add(name)
                if pinned:
                    wanted.add((name, pinned))
            elif name in VENDORING:
                lo, _ = bounds_of(spec.replace("~=", ">="))
                found = [pinned] if pinned else [
                    r for r in pypi.releases(name) if lo and version_key(r) >= version_key(lo)]
                if found:
                    wanted.add((name, min(found, key=version_key)))
    for project in sorted(projects):
        releases = sorted(pypi.releases(project), key=version_key, reverse=True)
        if releases:
            wanted.add((project, releases[0]))
        else:
            log(f"{project}: no final release on PyPI")
    rows = []
    for project, version in sorted(wanted, key=lambda pv: (pv[0], version_key(pv[1]))):
        w = pypi.wheel(project, version, prefer=("py3", "cp311", "cp312", "cp310"))
        if not w:
            log(f"{project} {version}: no Linux x86-64 wheel")
            continue
        for d, libs in wheel_libraries(w.names()).items():
            lines = sorted({version_line(f) for f in libs} - {""})
            row = {"project": project, "version": version, "dir": d, "libraries": libs}
            if lines:
                row["line"] = lines[0]
            row["source"] = w.source(f"shared objects under {d}/")
            rows.append(row)
    return rows


def splice_table(text, key, about, rows):
    """libraries.json's text with its top-level table `key` replaced (or appended) by `rows`,
    one row per line: the hand-formatted rest of the file stays as it is."""
    body = (f'  "{key}": {{\n    "about": {json.dumps(about, ensure_ascii=False)},\n    "rows": [\n' +
            ",\n".join("      " + json.dumps(r, ensure_ascii=False) for r in rows) + "\n    ]\n  }")
    at = text.find(f'\n  "{key}": {{')
    if at >= 0:
        end = text.find("\n  }", at)
        return text[:at + 1] + body + text[end + 4:]
    end = text.rstrip().rfind("}")
    return text[:end].rstrip() + ",\n" + body + "\n}\n"


WHEEL_LIBRARIES_ABOUT = (
    "The shared objects of NVIDIA's library wheels on PyPI, generated by "
    "tools/rules_from_artifacts.py (--only wheels): for each wheel `project` and `version`, the "
    "directory `dir` it installs `libraries` to under site-packages (file names, which are the "
    "sonames the wheels ship), and `line` when a file's version is of another version line than "
    "the wheel's (calendar: CUPTI's 2024.1.0). Rows: the newest release of every nvidia-* "
    "project that the newest cuda-toolkit of each CUDA major or torch 2.1 to the newest names "
    "(each project is one CUDA major: -cu11, -cu12, -cu13, unsuffixed from CUDA 13), and every "
    "release torch pins, with the triton it pins (which vendors CUPTI).")


# ---------------------------------------------------------------------------------------------


def write_json(path, data):
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", default=os.environ.get("IMGCHECK_WHEEL_CACHE", "/work/cache/wheels"))
    ap.add_argument("--rules", default=os.path.join(os.path.dirname(__file__), "..", "rules"))
    ap.add_argument("--only",
                    default="torch,tensorflow,jax,onnxruntime,cupy,cudnn,cuda,wheels")
    args = ap.parse_args()
    only = set(args.only.split(","))
    pypi = PyPI(args.cache)
    fw_path = os.path.join(args.rules, "frameworks.json")
    fw = json.load(open(fw_path))

    if "torch" in only:
        builds, pins = torch_rows(pypi)
        got = {(r["torch"], minor_of(r["cuda"])) for r in builds}
        # Rows of the other CUDA variants (wheels on download.pytorch.org, not on PyPI) stay.
        kept = [r for r in fw["torch_builds"]["rows"]
                if (r["torch"], minor_of(r["cuda"])) not in got]
        allrows = builds + kept
        allrows.sort(key=lambda r: (version_key(r["torch"]), version_key(r["cuda"])), reverse=True)
        fw["torch_builds"]["rows"] = allrows
        kept_pins = [r for r in fw["torch_cudnn_pins"]["rows"] if "PyPI" not in r["variant"]
                     and not r.get("confirmed", True) is False]
        fw["torch_cudnn_pins"]["rows"] = pins + kept_pins
    if "tensorflow" in only:
        documented = {minor_of(r["tensorflow"]): r for r in fw["tensorflow_builds"]["rows"]}
        rows = tensorflow_rows(pypi, documented)
        minors = {minor_of(r["tensorflow"]) for r in rows}
        kept = [r for r in fw["tensorflow_builds"]["rows"] if minor_of(r["tensorflow"]) not in minors]
        allrows = rows + kept
        allrows.sort(key=lambda r: version_key(r["tensorflow"]), reverse=True)
        fw["tensorflow_builds"]["rows"] = allrows
    if "jax" in only:
        fw["jax_plugins"]["rows"] = jax_rows(pypi, fw["jax_plugins"]["rows"])
    if "onnxruntime" in only:
        rows = onnxruntime_rows(pypi)
        if rows:
            oldest = min((r["from"] for r in rows), key=version_key)
            # Documented rows of older releases stay (after the generated ones, which win).
            kept = [r for r in fw["onnxruntime_builds"]["rows"]
                    if version_key(r["from"]) < version_key(oldest) and r["from"] != r.get("to")]
            fw["onnxruntime_builds"]["rows"] = rows + kept
    if "cupy" in only:
        rows = cupy_rows(pypi)
        if rows:
            fw["cupy_packages"]["rows"] = rows
    write_json(fw_path, fw)
    if "cuda" in only:
        cuda_path = os.path.join(args.rules, "cuda.json")
        cuda = json.load(open(cuda_path))
        rows = cuda_rows(pypi)
        if rows:
            cuda.setdefault("cuda_releases", {
                "about": "CUDA toolkit releases as the cuda-toolkit wheels on PyPI name them, "
                         "with the CUDA runtime wheel each pins: releases the data knows exist "
                         "(what is newer than all of them gets IC080). Minimum drivers are in "
                         "cuda_driver and cuda_minor_compat."})
            cuda["cuda_releases"]["rows"] = rows
            write_json(cuda_path, cuda)
    if "cudnn" in only:
        # libraries.json is hand-formatted: the cuDNN family's sets are checked against the
        # wheels, and only its `source` line is rewritten in place.
        lib_path = os.path.join(args.rules, "libraries.json")
        text = open(lib_path).read()
        fam = next(f for f in json.loads(text)["families"] if f.get("family") == "cudnn")
        sets, sources = cudnn_sets(pypi)
        for major, names in sets.items():
            if sorted(fam["sub_libraries"].get(major, [])) != names:
                sys.exit(f"libraries.json: cuDNN {major}'s sub-libraries are {names} in the wheels, "
                         f"not {fam['sub_libraries'].get(major)}: edit the family by hand")
        if sources:
            old = json.dumps(fam["source"], ensure_ascii=False)
            base = re.sub(r"; sub-library sets of cuDNN .*", "", fam["source"])
            new = json.dumps(base + "; sub-library sets of cuDNN " + ", ".join(sorted(sets)) +
                             " read from " + "; ".join(sources), ensure_ascii=False)
            text = text.replace('"source": ' + old, '"source": ' + new, 1)
            with open(lib_path + ".tmp", "w") as f:
                f.write(text)
            os.replace(lib_path + ".tmp", lib_path)
    if "wheels" in only:
        lib_path = os.path.join(args.rules, "libraries.json")
        rows = wheel_library_rows(pypi)
        if rows:
            text = splice_table(open(lib_path).read(), "wheel_libraries", WHEEL_LIBRARIES_ABOUT,
                                rows)
            json.loads(text)
            with open(lib_path + ".tmp", "w") as f:
                f.write(text)
            os.replace(lib_path + ".tmp", lib_path)
    # The data's version: the date of its newest fact (version.json, see rules/README.md).
    ver_path = os.path.join(args.rules, "version.json")
    ver = json.load(open(ver_path))
    ver["date"] = max(ver["date"], NEWEST[0])
    write_json(ver_path, ver)


if __name__ == "__main__":
    main()
