#!/usr/bin/env python3
"""Tests of tools/rules_from_artifacts.py's parsing on wheels built here (no network).

Run by ctest (rules_generator_test) and by hand: python3 tools/test_rules_from_artifacts.py
"""

import hashlib
import io
import json
import os
import struct
import sys
import tempfile
import unittest
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_from_artifacts as gen  # noqa: E402


def make_wheel(path, files):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tiny_elf(needed):
    """An ELF64 little-endian shared object: one PT_LOAD over the file, a PT_DYNAMIC with
    DT_NEEDED entries and DT_STRTAB."""
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n in needed)
    offsets, pos = [], 1
    for n in needed:
        offsets.append(pos)
        pos += len(n) + 1
    ehsize, phsize = 64, 56
    phoff = ehsize
    dyn_off = phoff + 2 * phsize
    dyn = b"".join(struct.pack("<qQ", 1, o) for o in offsets)
    str_off = dyn_off + len(dyn) + 3 * 16
    dyn += struct.pack("<qQ", 5, 0x1000 + str_off) + struct.pack("<qQ", 0, 0) + b"\0" * 16
    total = str_off + len(strtab)
    eh = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    eh += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, ehsize, phsize, 2, 64, 0, 0)
    ph_load = struct.pack("<IIQQQQQQ", 1, 5, 0, 0x1000, 0x1000, total, total, 0x1000)
    ph_dyn = struct.pack("<IIQQQQQQ", 2, 6, dyn_off, 0x1000 + dyn_off, 0x1000 + dyn_off,
                         len(dyn), len(dyn), 8)
    return eh + ph_load + ph_dyn + dyn + strtab


class FakePyPI:
    """releases() and wheel() over wheels written into a cache directory."""

    def __init__(self, cache):
        self.cache = cache
        self.files = {}

    def add(self, project, version, filename, files):
        sha = make_wheel(os.path.join(self.cache, filename), files)
        self.files.setdefault(project, {})[version] = [{
            "filename": filename, "url": "https://files.invalid/" + filename,
            "digests": {"sha256": sha}, "size": 0, "upload_time": "2026-01-02T03:04:05"}]
        return sha

    def releases(self, project):
        return self.files.get(project, {})

    def wheel(self, project, version, prefer=None):
        info = self.files.get(project, {}).get(version)
        return gen.Wheel(self.cache, project, info[0]) if info else None


TORCH_METADATA = """Metadata-Version: 2.1
Name: torch
Version: 2.15.0
Requires-Dist: filelock
Requires-Dist: nvidia-cudnn-cu13==9.26.0.51; platform_system == "Linux"
Requires-Dist: nvidia-cuda-runtime-cu13 (==13.2.51) ; platform_system == "Linux"
Requires-Dist: opt-einsum>=3.3; extra == "opt-einsum"
"""

BUILD_INFO_DICT = """import collections
build_info = collections.OrderedDict([('cpu_compiler', '/usr/bin/gcc'), ('cuda_version', '12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', True)])
"""
BUILD_INFO_OLD = """is_cuda_build = True
cuda_version_number = '10.1'
cudnn_version_number = '7'
"""


class ParsingTest(unittest.TestCase):
    def test_requires_dist_pins_and_bounds(self):
        reqs = gen.parse_requires(TORCH_METADATA)
        self.assertEqual([r[0] for r in reqs],
                         ["filelock", "nvidia-cudnn-cu13", "nvidia-cuda-runtime-cu13", "opt-einsum"])
        self.assertEqual(gen.pin_of(reqs[1][1]), "9.26.0.51")
        self.assertEqual(gen.pin_of(reqs[2][1]), "13.2.51")
        self.assertIsNone(gen.pin_of(reqs[3][1]))
        self.assertEqual(gen.bounds_of("<10.0,>=9.8"), ("9.8", "10.0"))
        self.assertEqual(gen.bounds_of(">=12.1"), ("12.1", None))

    def test_python_assignments_both_build_info_shapes(self):
        self.assertEqual(gen.parse_python_assignments(BUILD_INFO_DICT)["cuda_version"], "12.5.1")
        self.assertEqual(gen.parse_python_assignments(BUILD_INFO_DICT)["cudnn_version"], "9")
        old = gen.parse_python_assignments(BUILD_INFO_OLD)
        self.assertEqual((old["cuda_version_number"], old["cudnn_version_number"]), ("10.1", "7"))
        v = gen.parse_python_assignments("__version__ = '2.5.1+cu124'\ncuda: Optional[str] = '12.4'\n")
        self.assertEqual(v["cuda"], "12.4")

    def test_elf_needed_and_constants(self):
        elf = tiny_elf(["libcudart.so.12", "libcudnn.so.9", "libc.so.6"])
        self.assertEqual(gen.elf_needed(elf), ["libcudart.so.12", "libcudnn.so.9", "libc.so.6"])
        self.assertEqual(gen.elf_dynamic_end(elf[:4096]), 64 + 2 * 56 + 6 * 16)
        self.assertEqual(gen.elf_needed(b"not an elf"), [])
        code = b"\x90\xbf" + struct.pack("<I", 90800) + b"\xe9\0\0\0\0" + \
            b"\xb8" + struct.pack("<I", 12030) + b"\xc3"
        self.assertEqual(gen.returned_constants(code, 90000, 109999), [90800])
        self.assertEqual(gen.returned_constants(code, 12000, 13999), [12030])

    def test_shared_objects_and_version_lines(self):
        names = ["nvidia/cu13/lib/libcublas.so.13", "nvidia/cu13/lib/libcublas_static.a",
                 "nvidia/cu13/include/cublas.h", "nvidia/cusparselt/lib/libcusparseLt.so.0",
                 "triton/backends/nvidia/lib/cupti/libcupti.so.2024.1.0",
                 "triton/_C/libtriton.cpython-311-x86_64-linux-gnu.so", "x/lib/libnvshmem_host.so"]
        self.assertEqual(gen.wheel_libraries(names), {
            "nvidia/cu13/lib": ["libcublas.so.13"],
            "nvidia/cusparselt/lib": ["libcusparseLt.so.0"],
            "triton/backends/nvidia/lib/cupti": ["libcupti.so.2024.1.0"],
            "x/lib": ["libnvshmem_host.so"]})
        self.assertEqual(gen.version_line("libcupti.so.2024.1.0"), "calendar")
        self.assertEqual(gen.version_line("libcupti.so.12"), "")
        self.assertEqual(gen.version_line("libcublas.so.12.4.5.8"), "")
        self.assertEqual(gen.family_base("nvidia-cublas-cu12"), "nvidia-cublas")

    def test_cudnn_sublibraries(self):
        names = ["nvidia/cudnn/lib/libcudnn.so.9", "nvidia/cudnn/lib/libcudnn_ops.so.9",
                 "nvidia/cudnn/lib/libcudnn_graph.so.9", "nvidia/cudnn/include/cudnn.h"]
        self.assertEqual(gen.cudnn_sublibraries(names), {"9": ["libcudnn_graph", "libcudnn_ops"]})


class TablesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.pypi = FakePyPI(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_torch_rows_name_their_wheel(self):
        sha = self.pypi.add("torch", "2.15.0", "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl", {
            "torch/version.py": "__version__ = '2.15.0'\ncuda = '13.2'\n",
            "torch-2.15.0.dist-info/METADATA": TORCH_METADATA})
        self.pypi.add("torch", "1.12.0", "torch-1.12.0-cp311-cp311-manylinux1_x86_64.whl", {
            "torch/version.py": "cuda = '11.3'\n", "torch-1.12.0.dist-info/METADATA": ""})
        builds, pins = gen.torch_rows(self.pypi)
        self.assertEqual(len(builds), 1)  # 1.12 is before the tables' first release
        row = builds[0]
        self.assertEqual((row["torch"], row["cuda"], row["cudnn"]), ("2.15", "13.2", "9.26.0.51"))
        self.assertIn("torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl (sha256 " + sha + ")",
                      row["source"])
        self.assertEqual(pins[0]["package"], "nvidia-cudnn-cu13")

    def test_tensorflow_rows_from_build_info(self):
        self.pypi.add("tensorflow", "2.19.0", "tensorflow-2.19.0-cp311-cp311-manylinux_2_17_x86_64.whl", {
            "tensorflow/python/platform/build_info.py": BUILD_INFO_DICT,
            "tensorflow-2.19.0.dist-info/METADATA":
                "Requires-Dist: nvidia-cudnn-cu12==9.3.0.75; extra == \"and-cuda\"\n"})
        self.pypi.add("tensorflow", "2.2.0", "tensorflow-2.2.0-cp38-cp38-manylinux2010_x86_64.whl", {
            "tensorflow/python/platform/build_info.py": BUILD_INFO_OLD,
            "tensorflow-2.2.0.dist-info/METADATA": ""})
        # 2.0's GPU build is the tensorflow-gpu wheel, its package tensorflow_core.
        self.pypi.add("tensorflow", "2.0.0", "tensorflow-2.0.0-cp37-cp37m-manylinux2010_x86_64.whl",
                      {"tensorflow-2.0.0.dist-info/METADATA": ""})
        self.pypi.add("tensorflow-gpu", "2.0.0",
                      "tensorflow_gpu-2.0.0-cp37-cp37m-manylinux2010_x86_64.whl", {
                          "tensorflow_core/python/platform/build_info.py":
                              BUILD_INFO_OLD.replace("'10.1'", "'10'"),
                          "tensorflow_gpu-2.0.0.dist-info/METADATA": ""})
        documented = {"2.2": {"cudnn": "7.6", "cuda": "10.1"}, "2.0": {"cudnn": "7.4", "cuda": "10.0"}}
        rows = {r["tensorflow"]: r for r in gen.tensorflow_rows(self.pypi, documented)}
        # build_info names only CUDA 10: the documented minor of the same major is kept.
        self.assertEqual((rows["2.0.0"]["cuda"], rows["2.0.0"]["cudnn"]), ("10.0", "7.4"))
        self.assertEqual(rows["2.0.0"]["package"], "tensorflow-gpu")
        self.assertEqual((rows["2.19.0"]["cuda"], rows["2.19.0"]["cudnn"]), ("12.5.1", "9.3.0.75"))
        self.assertEqual((rows["2.2.0"]["cuda"], rows["2.2.0"]["cudnn"]), ("10.1", "7.6"))
        self.assertIn("tested build configurations", rows["2.2.0"]["source"])

    def test_wheel_libraries_of_every_nvidia_family(self):
        # torch pins a cuda-toolkit (whose components it names under extras), cuSPARSELt
        # directly, and triton, which vendors CUPTI under its calendar version.
        self.pypi.add("torch", "2.15.0", "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl", {
            "torch-2.15.0.dist-info/METADATA":
                "Requires-Dist: cuda-toolkit[cublas,cupti]==13.2.2; platform_system == \"Linux\"\n"
                "Requires-Dist: nvidia-cusparselt-cu13==0.8.1; platform_system == \"Linux\"\n"
                "Requires-Dist: triton~=3.9.0; platform_system == \"Linux\"\n"})
        self.pypi.add("torch", "2.0.1", "torch-2.0.1-cp311-cp311-manylinux1_x86_64.whl", {
            "torch-2.0.1.dist-info/METADATA": "Requires-Dist: nvidia-nccl-cu11==2.14.3\n"})
        self.pypi.add("cuda-toolkit", "13.2.2", "cuda_toolkit-13.2.2-py2.py3-none-any.whl", {
            "cuda_toolkit-13.2.2.dist-info/METADATA":
                "Requires-Dist: nvidia-cublas==13.3.0.5.*; extra == 'cublas'\n"
                "Requires-Dist: nvidia-cuda-cupti==13.2.51.*; extra == 'cupti'\n"})
        self.pypi.add("nvidia-cublas", "13.3.0.5", "nvidia_cublas-13.3.0.5-py3-none-manylinux_2_27_x86_64.whl", {
            "nvidia/cu13/lib/libcublas.so.13": "x", "nvidia/cu13/lib/libcublasLt.so.13": "x",
            "nvidia/cu13/include/cublas.h": "", "nvidia/cu13/lib/libcublas_static.a": ""})
        self.pypi.add("nvidia-cuda-cupti", "13.2.51", "nvidia_cuda_cupti-13.2.51-py3-none-manylinux_2_27_x86_64.whl", {
            "nvidia/cu13/lib/libcupti.so.13": "x"})
        cusparselt = self.pypi.add(
            "nvidia-cusparselt-cu13", "0.8.1", "nvidia_cusparselt_cu13-0.8.1-py3-none-manylinux2014_x86_64.whl",
            {"nvidia/cusparselt/lib/libcusparseLt.so.0": "x"})
        self.pypi.add("nvidia-cusparselt-cu12", "0.7.1", "nvidia_cusparselt_cu12-0.7.1-py3-none-manylinux2014_x86_64.whl",
                      {"nvidia/cusparselt/lib/libcusparseLt.so.0": "x"})
        self.pypi.add("triton", "3.9.0", "triton-3.9.0-cp311-cp311-manylinux_2_27_x86_64.whl", {
            "triton/backends/nvidia/lib/cupti/libcupti.so.2025.1.1": "x",
            "triton/backends/nvidia/lib/cupti/libcupti.so.13": "x",
            "triton/_C/libtriton.cpython-311-x86_64-linux-gnu.so": "x"})
        self.pypi.add("triton", "3.10.0", "triton-3.10.0-cp311-cp311-manylinux_2_27_x86_64.whl", {})
        rows = gen.wheel_library_rows(self.pypi)
        got = {(r["project"], r["version"], r["dir"]): r for r in rows}
        self.assertEqual(sorted(got), [
            ("nvidia-cublas", "13.3.0.5", "nvidia/cu13/lib"),
            ("nvidia-cuda-cupti", "13.2.51", "nvidia/cu13/lib"),
            ("nvidia-cusparselt-cu13", "0.8.1", "nvidia/cusparselt/lib"),
            ("triton", "3.9.0", "triton/backends/nvidia/lib/cupti")])
        # Only projects some artifact names: cu12's cuSPARSELt is no torch 2.1+ pin here, and
        # torch 2.0's nccl is before 2.1.
        self.assertEqual(got[("nvidia-cublas", "13.3.0.5", "nvidia/cu13/lib")]["libraries"],
                         ["libcublas.so.13", "libcublasLt.so.13"])
        vendored = got[("triton", "3.9.0", "triton/backends/nvidia/lib/cupti")]
        self.assertEqual(vendored["line"], "calendar")
        self.assertNotIn("line", got[("nvidia-cuda-cupti", "13.2.51", "nvidia/cu13/lib")])
        self.assertIn("nvidia_cusparselt_cu13-0.8.1-py3-none-manylinux2014_x86_64.whl (sha256 " +
                      cusparselt + ")", got[("nvidia-cusparselt-cu13", "0.8.1",
                                             "nvidia/cusparselt/lib")]["source"])

    def test_wheel_libraries_table_is_spliced_into_the_hand_formatted_file(self):
        text = '{\n  "families": [\n    {"family": "x"}\n  ]\n}\n'
        rows = [{"project": "p", "version": "1", "dir": "d", "libraries": ["liba.so.1"],
                 "source": "s"}]
        once = gen.splice_table(text, "wheel_libraries", "about", rows)
        self.assertEqual(json.loads(once)["wheel_libraries"]["rows"], rows)
        self.assertIn('    {"family": "x"}\n', once)  # the rest keeps its formatting
        rows[0]["version"] = "2"
        twice = gen.splice_table(once, "wheel_libraries", "about", rows)
        self.assertEqual(json.loads(twice)["wheel_libraries"]["rows"][0]["version"], "2")
        self.assertEqual(twice.count("wheel_libraries"), 1)

    def test_local_wheel_must_match_its_digest(self):
        sha = self.pypi.add("x", "1.0", "x-1.0-py3-none-manylinux1_x86_64.whl", {"a": "b"})
        info = dict(self.pypi.files["x"]["1.0"][0])
        info["digests"] = {"sha256": "0" * 64}
        with self.assertRaises(SystemExit):
            gen.Wheel(self.tmp.name, "x", info)
        self.assertEqual(gen.Wheel(self.tmp.name, "x", self.pypi.files["x"]["1.0"][0]).read("a"), b"b")
        self.assertTrue(sha)


class DataTest(unittest.TestCase):
    """The generated rows against the hand-written families of rules/libraries.json."""

    def test_every_versioned_file_of_another_line_is_modelled(self):
        import fnmatch
        lib = json.load(open(os.path.join(os.path.dirname(__file__), "..", "rules",
                                          "libraries.json")))
        families = lib["families"]

        def family_of(base):
            for f in families:
                if any(fnmatch.fnmatchcase(base, g) for g in f["libraries"]) and not any(
                        fnmatch.fnmatchcase(base, g) for g in f.get("exclude", [])):
                    return f
            return None

        seen = 0
        for row in lib.get("wheel_libraries", {}).get("rows", []):
            self.assertTrue(row["source"])
            for name in row["libraries"]:
                line = gen.version_line(name)
                if not line:
                    continue
                f = family_of(name.split(".so")[0])
                self.assertIsNotNone(f, name)
                version = name.split(".so.", 1)[1]
                globs = [v["version"] for v in f.get("version_lines", []) if v["line"] == line]
                self.assertTrue(any(fnmatch.fnmatchcase(version, g) for g in globs),
                                f"{name} ({row['project']} {row['version']}): family "
                                f"{f['family']} has no {line} version line matching {version}")
                seen += 1
        self.assertGreater(seen, 0)


if __name__ == "__main__":
    unittest.main()
