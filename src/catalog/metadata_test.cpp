#include "catalog/metadata.h"

#include <catch2/catch.hpp>

#include "catalog/library_rules.h"
#include "catalog/test_rules.h"
#include "support.h"

namespace imgcheck::catalog {

TEST_CASE("library file names give base name and version", "[catalog][metadata]") {
  CHECK(LibraryBaseName("libcudnn_ops.so.9.1.0") == "libcudnn_ops");
  CHECK(LibraryBaseName("libcudnn.so") == "libcudnn");
  CHECK(LibraryBaseName("_C.cpython-311-x86_64-linux-gnu.so") == "_C.cpython-311-x86_64-linux-gnu");
  CHECK(LibraryBaseName("libsomething.sonnet") == "");
  CHECK(LibraryBaseName("cudnn.h") == "");
  CHECK(FilenameVersion("libcudnn.so.8.9.2") == "8.9.2");
  CHECK(FilenameVersion("libcudnn.so.9") == "9");
  CHECK(FilenameVersion("libcudnn.so") == "");
  CHECK(FilenameVersion("libcuda.so.535.104.05") == "535.104.05");
  CHECK(FilenameVersion("libfoo.so.1.2.bak") == "1.2");
}

TEST_CASE("versions: dpkg upstream part, precision, PEP 503 names", "[catalog][metadata]") {
  CHECK(UpstreamVersion("8.9.2.26-1+cuda12.1") == "8.9.2.26");
  CHECK(UpstreamVersion("1:2.3-4ubuntu1") == "2.3");
  CHECK(UpstreamVersion("530.30.02-1") == "530.30.02");
  CHECK(UpstreamVersion("2.36") == "2.36");
  CHECK(VersionPrecision("8.9.2.26") == 4);
  CHECK(VersionPrecision("9") == 1);
  CHECK(VersionPrecision("12.x") == 1);
  CHECK(VersionPrecision("2.3.0+cu121") == 3);
  CHECK(VersionPrecision("") == 0);
  CHECK(NormalizeDistName("Nvidia_CUDNN.cu12") == "nvidia-cudnn-cu12");
  CHECK(NormalizeDistName("tensorflow-gpu") == "tensorflow-gpu");
}

TEST_CASE("dpkg status paragraphs", "[catalog][metadata]") {
  auto pkgs = ParseDpkgStatus(
      "Package: libcudnn8\nStatus: hold ok installed\nPriority: optional\nArchitecture: amd64\n"
      "Version: 8.9.2.26-1+cuda12.1\nDescription: cuDNN runtime libraries\n continued line\n\n"
      "Package: libc6\r\nStatus: install ok installed\r\nVersion: 2.35-0ubuntu3\r\n");
  REQUIRE(pkgs.size() == 2);
  CHECK(pkgs[0].name == "libcudnn8");
  CHECK(pkgs[0].status == "hold ok installed");
  CHECK(pkgs[0].version == "8.9.2.26-1+cuda12.1");
  CHECK(pkgs[0].architecture == "amd64");
  CHECK(pkgs[1].name == "libc6");
  CHECK(pkgs[1].version == "2.35-0ubuntu3");
}

TEST_CASE("dist METADATA, Requires-Dist pins and RECORD", "[catalog][metadata]") {
  DistMetadata m = ParseDistMetadata(
      "Metadata-Version: 2.1\nName: torch\nVersion: 2.1.0\n"
      "Requires-Dist: filelock\n"
      "Requires-Dist: nvidia-cudnn-cu12 (==8.9.2.26) ; platform_system == \"Linux\"\n"
      "Requires-Dist: Nvidia_CUBLAS_cu12 ==12.1.3.1; platform_system == \"Linux\"\n"
      "Requires-Dist: sympy>=1.0,<2\n"
      "Requires-Dist: opt-einsum[extra] >=3.3 ; extra == \"opt\"\n"
      "\nRequires-Dist: not-a-header==1\n");
  CHECK(m.name == "torch");
  CHECK(m.version == "2.1.0");
  REQUIRE(m.requires_dist.size() == 5);
  CHECK(m.requires_dist[0].name == "filelock");
  CHECK(m.requires_dist[0].Pinned() == "");
  CHECK(m.requires_dist[1].name == "nvidia-cudnn-cu12");
  CHECK(m.requires_dist[1].Pinned() == "8.9.2.26");
  CHECK(m.requires_dist[1].marker == "platform_system == \"Linux\"");
  CHECK(m.requires_dist[2].name == "nvidia-cublas-cu12");
  CHECK(m.requires_dist[2].Pinned() == "12.1.3.1");
  CHECK(m.requires_dist[3].specifier == ">=1.0,<2");
  CHECK(m.requires_dist[3].Pinned() == "");
  CHECK(m.requires_dist[4].name == "opt-einsum");
  CHECK(m.requires_dist[4].specifier == ">=3.3");
  CHECK(m.requires_dist[4].extras == std::vector<std::string>{"extra"});
  CHECK(m.requires_dist[4].under_extras == std::vector<std::string>{"opt"});
  CHECK(m.requires_dist[1].extras.empty());
  CHECK(m.requires_dist[1].under_extras.empty());
  // torch 2.10's form: the toolkit with extras; the toolkit's components under them.
  Requirement toolkit =
      ParseRequirement("cuda-toolkit[cublas,Cuda_Runtime]==13.2.2; platform_system == \"Linux\"");
  CHECK(toolkit.name == "cuda-toolkit");
  CHECK(toolkit.extras == std::vector<std::string>{"cublas", "cuda-runtime"});
  CHECK(toolkit.specifier == "==13.2.2");
  Requirement cublas = ParseRequirement(
      "nvidia-cublas==13.0.0.19.*; (sys_platform == 'linux') and extra == 'cublas' or "
      "extra=='all'");
  CHECK(cublas.under_extras == std::vector<std::string>{"cublas", "all"});

  auto record = ParseRecord(
      "nvidia/cudnn/lib/libcudnn.so.9,sha256=abc,129240\n"
      "\"odd,name\"\"q\",sha256=x,1\r\n"
      "nvidia_cudnn_cu12-9.1.0.70.dist-info/RECORD,,\n");
  REQUIRE(record.size() == 3);
  CHECK(record[0].path == "nvidia/cudnn/lib/libcudnn.so.9");
  CHECK(record[0].size == 129240u);
  CHECK(record[1].path == "odd,name\"q");
  CHECK(record[1].size == 1u);
  CHECK(record[2].path == "nvidia_cudnn_cu12-9.1.0.70.dist-info/RECORD");
  CHECK_FALSE(record[2].size);
}

TEST_CASE("conda-meta json", "[catalog][metadata]") {
  auto p = ParseCondaMeta(
      R"({"name":"cudnn","version":"8.9.2.26","build":"cuda12_0","files":["lib/libcudnn.so.8"]})");
  REQUIRE(p);
  CHECK(p->name == "cudnn");
  CHECK(p->version == "8.9.2.26");
  CHECK(p->files == std::vector<std::string>{"lib/libcudnn.so.8"});
  CHECK_FALSE(ParseCondaMeta("{\"name\": 3}"));
  CHECK_FALSE(ParseCondaMeta("{truncated"));
}

TEST_CASE("version headers and toolkit version files", "[catalog][metadata]") {
  CHECK(CudnnHeaderVersion(
            "#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 2\n"
            "#define CUDNN_VERSION (CUDNN_MAJOR * 1000 + CUDNN_MINOR * 100)\n") == "8.9.2");
  CHECK(CudnnHeaderVersion("#  define CUDNN_MAJOR\t9\n#define CUDNN_MINOR 10\n"
                           "#define CUDNN_PATCHLEVEL 2\n") == "9.10.2");
  CHECK_FALSE(CudnnHeaderVersion("#include \"cudnn_version.h\"\n"));
  CHECK_FALSE(CudnnHeaderVersion(
      "#define CUDNN_MAJORX 8\n#define CUDNN_MINOR 9\n#define CUDNN_PATCHLEVEL 2"));
  CHECK(CudartHeaderVersion("#define CUDART_VERSION 12010\n") == "12.1");
  CHECK(CudartHeaderVersion("#define CUDART_VERSION  11080\n") == "11.8");
  CHECK(CudaVersionString(12080) == "12.8");
  CHECK(CudaVersionString(11020) == "11.2");
  CHECK(DecodeCudaVersion(13010).major == 13);
  CHECK(DecodeCudaVersion(13010).minor == 1);
  // A number no integer holds is no version (it was once cut to its first nine digits).
  CHECK_FALSE(CudartHeaderVersion("#define CUDART_VERSION 120100000000000000000000\n"));
  CHECK(CudartHeaderVersion("#define CUDART_VERSION 1201000000\n") == "1201000.0");
  auto json = ParseCudaVersionJson(
      R"j({"cuda":{"name":"CUDA SDK","version":"12.1.1"},"cuda_cudart":{"name":"CUDA Runtime (cudart)","version":"12.1.105"},"x":3})j");
  REQUIRE(json);
  CHECK(json->at("cuda") == "12.1.1");
  CHECK(json->at("cuda_cudart") == "12.1.105");
  CHECK(json->count("x") == 0);
  CHECK(ParseCudaVersionTxt("CUDA Version 10.2.89\n") == "10.2.89");
  CHECK_FALSE(ParseCudaVersionTxt("nothing"));
}

TEST_CASE("python build files: torch, TF2 OrderedDict, TF1 module vars", "[catalog][metadata]") {
  BuildFacts torch = ParsePythonLiterals(
      "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', "
      "'hip']\n"
      "__version__ = '2.1.0+cu121'\ndebug = False\ncuda: Optional[str] = '12.1'\n"
      "git_version = '7bcf7da3a268b435777fe87c7794c382f444e86d'\nhip: Optional[str] = None\n"
      "    indented = 'ignored'\nif x == '3': pass\n");
  CHECK(torch.at("__version__") == "2.1.0+cu121");
  CHECK(torch.at("cuda") == "12.1");
  CHECK(torch.at("hip") == "None");
  CHECK(torch.at("debug") == "False");
  CHECK(torch.at("__all__") == "__version__,debug,cuda,git_version,hip");
  CHECK(torch.count("indented") == 0);

  BuildFacts tf2 = ParsePythonLiterals(
      "import collections\n\nbuild_info = collections.OrderedDict([('cpu_compiler', "
      "'/dt9/usr/bin/gcc'), ('cuda_compute_capabilities', ['sm_35', 'sm_50', 'compute_80']), "
      "('cuda_version', '11.2'),\n ('cudnn_version', '8'), ('is_cuda_build', True), "
      "('is_rocm_build', False)])\n");
  CHECK(tf2.at("cuda_version") == "11.2");
  CHECK(tf2.at("cudnn_version") == "8");
  CHECK(tf2.at("cuda_compute_capabilities") == "sm_35,sm_50,compute_80");
  CHECK(tf2.at("is_cuda_build") == "True");

  BuildFacts tf1 = ParsePythonLiterals(
      "is_cuda_build = True\ncuda_version_number = '10.0'\ncudnn_version_number = '7'\n");
  CHECK(tf1.at("cuda_version_number") == "10.0");
  CHECK(tf1.at("cudnn_version_number") == "7");

  BuildFacts dict = ParsePythonLiterals("build_info = {'cuda_version': \"12.3\", 'n': 3}\n");
  CHECK(dict.at("cuda_version") == "12.3");
  CHECK(dict.at("n") == "3");

  // Hostile: unterminated strings and lists must not hang or throw.
  BuildFacts bad = ParsePythonLiterals("a = 'x\nb = [\nc = ('k', \nd = collections.OrderedDict([(");
  CHECK(bad.count("a") == 0);
}

TEST_CASE("cupy _wheel.json and os-release", "[catalog][metadata]") {
  auto cupy = ParseCupyWheelJson(
      R"({"cuda":"12.x","packaging":"pip","cudnn":{"version":"8.8.1","filename":"x.tar"}})");
  REQUIRE(cupy);
  CHECK(cupy->at("cuda") == "12.x");
  CHECK(cupy->at("cudnn.version") == "8.8.1");
  auto os = ParseOsRelease("NAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\nID=ubuntu\n# c\nBAD\n");
  CHECK(os.at("ID") == "ubuntu");
  CHECK(os.at("VERSION_ID") == "22.04");
  CHECK(os.count("BAD") == 0);
}

TEST_CASE("libraries.json classifies every family it names", "[catalog][rules]") {
  const LibraryRules& rules = BuiltInRules();
  auto family = [&](std::string_view base) {
    const Family* f = rules.Classify(base);
    return f ? f->family : std::string("-");
  };
  for (std::string_view sub :
       {"libcudnn", "libcudnn_ops_infer", "libcudnn_cnn_train", "libcudnn_adv_infer",
        "libcudnn_graph", "libcudnn_engines_precompiled", "libcudnn_engines_runtime_compiled",
        "libcudnn_heuristic"}) {
    CHECK(family(sub) == "cudnn");
  }
  CHECK(family("libcudart") == "cudart");
  CHECK(family("libcublasLt") == "cublas");
  CHECK(family("libnvJitLink") == "nvjitlink");
  CHECK(family("libnvrtc-builtins") == "nvrtc");
  CHECK(family("libnvinfer_plugin") == "tensorrt");
  CHECK(family("libcuda") == "driver");
  CHECK(family("libnvidia-ml") == "driver");
  CHECK(family("libnvidia-container") == "-");
  CHECK(family("libc") == "-");
  CHECK(family("libcudadevrt") == "-");
  const Family* cudnn = rules.ByPackage(PackageManager::kDpkg, "libcudnn9-cuda-12");
  REQUIRE(cudnn != nullptr);
  CHECK(cudnn->family == "cudnn");
  CHECK(rules.ByPackage(PackageManager::kPip, "nvidia-cudnn-cu12")->family == "cudnn");
  CHECK(rules.ByPackage(PackageManager::kPip, "nvidia-cuda-runtime")->family == "cudart");
  CHECK(rules.ByPackage(PackageManager::kPip, "torch") == nullptr);
  CHECK(rules.ByHeader("cudnn_version_v9.h")->family == "cudnn");
  for (const Family& f : rules.families) CHECK_FALSE(f.source.empty());
  // CUPTI's calendar versions are a line of their own; the component versions the default one.
  const Family* cupti = rules.Find("cupti");
  REQUIRE(cupti != nullptr);
  CHECK(cupti->LineOf("2024.1.0") == "calendar");
  CHECK(cupti->LineOf("12.4.127").empty());
  CHECK(rules.Find("cublas")->LineOf("2024.1.0").empty());
}

// Malformed classification data stops the run at its line: it never leaves the catalog (or the
// checks that ask it for families) silently empty.
TEST_CASE("libraries.json errors name the file and line", "[catalog][rules]") {
  auto fails = [](std::string_view text) {
    auto file = util::ParseDataFile("dir/libraries.json", text);
    REQUIRE(file);
    try {
      LibraryRules::FromFiles({*file});
    } catch (const util::Fatal& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(fails("{\"families\": [\n {\"family\": \"x\", \"libraries\": [],\n  \"kind\": \"nope\", "
              "\"source\": \"s\"}]}") ==
        "dir/libraries.json:3: kind must be \"cuda-library\" or \"driver-library\"");
  // A kind the catalog knows, but not one a family may have.
  CHECK(
      fails(
          "{\"families\": [\n {\"family\": \"x\", \"libraries\": [],\n  \"kind\": \"driver-stub\", "
          "\"source\": \"s\"}]}") ==
      "dir/libraries.json:3: kind must be \"cuda-library\" or \"driver-library\"");
  CHECK(fails("{\"families\": [\n {\"family\": \"x\", \"kind\": \"cuda-library\", \"libraries\": "
              "[], \"source\": \"\"}]}") == "dir/libraries.json:2: family x has no source");
  CHECK(fails("{\"families\": [{\"family\": \"x\", \"kind\": \"cuda-library\",\n \"libraries\": "
              "[], \"source\": \"s\", \"sub_libraries\": {\"9\": \"libcudnn_ops\"}}]}") ==
        "dir/libraries.json:2: sub_libraries maps a major to a list of library names");
  CHECK(fails("{\"families\": [],\n \"framework_files\": {\"rows\": [\n {\"path\": \"a/b.py\", "
              "\"format\": \"yaml\", \"source\": \"s\"}]}}") ==
        "dir/libraries.json:3: format must be \"python\" or \"json\"");
  CHECK(fails("{\"stub_dirs\": \"stubs\",\n \"families\": []}") ==
        "dir/libraries.json:1: field \"stub_dirs\" must be a list of strings");
  CHECK(fails("{\"families\": [{\"family\": \"x\", \"kind\": \"cuda-library\", \"libraries\": [],"
              "\n \"source\": \"s\", \"version_lines\": [\n {\"line\": \"calendar\", "
              "\"version\": \"20*\"}]}]}") == "dir/libraries.json:3: missing field \"source\"");
  CHECK(fails("{\"families\": {}}") ==
        "dir/libraries.json:1: libraries.json must have a \"families\" list");
}

TEST_CASE("framework files and CUDA package names come from the rule data", "[catalog][rules]") {
  const LibraryRules& rules = BuiltInRules();
  REQUIRE(rules.Framework("/usr/lib/python3/dist-packages/torch/version.py") != nullptr);
  CHECK(rules.Framework("/x/site-packages/torch/version.py")->framework == "torch");
  CHECK(rules.Framework("/x/site-packages/jax_cuda12_plugin/version.py")->framework.empty());
  CHECK(rules.Framework("/x/site-packages/cupy/.data/_wheel.json")->json);
  CHECK(rules.Framework("/x/site-packages/torch/functional.py") == nullptr);
  CHECK(rules.Framework("version.py") == nullptr);
  for (const FrameworkFile& f : rules.framework_files) CHECK_FALSE(f.source.empty());
  CHECK(rules.IsCudaPackage(PackageManager::kDpkg, "cuda-nvcc-12-1"));
  CHECK(rules.IsCudaPackage(PackageManager::kConda, "cudatoolkit"));
  CHECK(rules.IsCudaPackage(PackageManager::kDpkg, "libcudnn8"));  // by its family
  CHECK_FALSE(rules.IsCudaPackage(PackageManager::kDpkg, "curl"));
}

TEST_CASE("what a package manager was asked to install", "[catalog][metadata]") {
  // apt's extended_states: the packages apt installed as dependencies.
  std::vector<DpkgPackage> states = ParseDpkgStatus(
      "Package: libcudnn8\nArchitecture: amd64\nAuto-Installed: 0\n\n"
      "Package: libcublas-12-1\nArchitecture: amd64\nAuto-Installed: 1\n");
  REQUIRE(states.size() == 2);
  CHECK_FALSE(states[0].auto_installed);
  CHECK(states[1].auto_installed);
  // A RUN line: the names after `install`, each command up to its separator.
  CHECK(InstalledOnCommandLine("/bin/sh -c apt-get update && DEBIAN_FRONTEND=noninteractive "
                               "apt-get install -y --no-install-recommends libcudnn8=8.9.2.26-1+"
                               "cuda12.1 'libnccl2' -o Dpkg::Options::=--force-confnew "
                               "cuda-libraries-12-1:amd64 ./local.deb && rm -rf /x",
                               "apt") ==
        std::vector<std::string>{"libcudnn8", "libnccl2", "cuda-libraries-12-1"});
  CHECK(InstalledOnCommandLine("apt install -y libsox3; echo install me", "apt") ==
        std::vector<std::string>{"libsox3"});
  CHECK(InstalledOnCommandLine("apt-get remove -y libfoo", "apt").empty());
  CHECK(InstalledOnCommandLine("pip install --no-cache-dir -r req.txt torch==2.6.0 "
                               "\"torchvision>=0.21\" 'xformers[cuda]' /tmp/my.whl -e .",
                               "pip") ==
        std::vector<std::string>{"torch", "torchvision", "xformers"});
  CHECK(InstalledOnCommandLine("python3 -m pip install -U nvidia-cudnn-cu12 | tee log", "pip") ==
        std::vector<std::string>{"nvidia-cudnn-cu12"});
  CHECK(InstalledOnCommandLine("pip3.11 install jax", "pip") == std::vector<std::string>{"jax"});
  CHECK(InstalledOnCommandLine("pipx install black && pipeline install x", "pip").empty());
  CHECK(InstalledOnCommandLine("apt-get install -y libfoo", "pip").empty());
  // conda's history: the specs of each install or update.
  CHECK(ParseCondaHistorySpecs("==> 2024-01-01 00:00:00 <==\n# cmd: conda install cudnn=8.9\n"
                               "# conda version: 23.1.0\n+conda-forge/linux-64::cudnn-8.9.2\n"
                               "# update specs: ['cudnn=8.9', \"conda-forge::numpy>=1.26\"]\n"
                               "# install specs: ['python=3.11']\n# remove specs: ['scipy']\n") ==
        std::vector<std::string>{"cudnn", "numpy", "python"});
  CHECK(ParseCondaHistorySpecs("# update specs: ['unterminated").empty());
}

}  // namespace imgcheck::catalog
