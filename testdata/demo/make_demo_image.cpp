// Writes the demo image that `scripts/dev demo` scans: the failure imgcheck exists for.
//
// A TensorFlow 1.2 GPU image (compiled against cuDNN 5.1 and CUDA 8.0) whose Dockerfile later
// copied an older cuDNN 5.0.5 into /opt/cudnn and put it first on LD_LIBRARY_PATH, next to the
// toolkit's driver stub. At run time TensorFlow would print
//   Loaded runtime CuDNN library: 5005 (compatibility version 5000) but source was compiled
//   with 5110 (compatibility version 5100)
// and the stub libcuda would make every CUDA call fail. Equivalent Dockerfile: Dockerfile beside
// this file. The shared objects are compiled here from tiny C sources with the real sonames.
//
// usage: make_demo_image OUT_LAYOUT_DIR
#include <filesystem>
#include <iostream>

#include "image_writer.h"
#include "support.h"

namespace fs = std::filesystem;
using namespace imgcheck::testing;

namespace {

// A fake library exporting `symbols` (each returning `value`), with the given soname.
fs::path Lib(const fs::path& dir, const std::string& file, const std::string& soname,
             const std::string& body, std::vector<std::string> needed = {}) {
  SharedObject so;
  so.soname = soname;
  so.source = "#include <stddef.h>\n" + body;
  so.needed = std::move(needed);
  fs::path out = dir / file;
  Compile(so, out);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_demo_image OUT_LAYOUT_DIR\n";
    return 2;
  }
  fs::path out = argv[1];
  TempDir tmp;
  fs::path lib = tmp.path();
  try {
    auto cudart = Lib(lib, "libcudart.so.8.0.61", "libcudart.so.8.0",
                      "int cudaRuntimeGetVersion(int* v) { *v = 8000; return 0; }\n");
    auto cudnn51 = Lib(lib, "libcudnn.so.5.1.10", "libcudnn.so.5",
                       "size_t cudnnGetVersion(void) { return 5110; }\n");
    auto cudnn50 = Lib(lib, "libcudnn.so.5.0.5", "libcudnn.so.5",
                       "size_t cudnnGetVersion(void) { return 5005; }\n");
    auto stub = Lib(lib, "libcuda.so", "libcuda.so.1", "int cuInit(unsigned f) { return 0; }\n");
    auto tf = Lib(lib, "_pywrap_tensorflow_internal.so", "",
                  "int cudaRuntimeGetVersion(int*);\n"
                  "int tf_init(void) { int v; return cudaRuntimeGetVersion(&v); }\n",
                  {cudart.string()});

    const std::string site = "usr/local/lib/python3.5/dist-packages/";
    ImageRecipe r;
    r.env = {"PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin", "CUDA_VERSION=8.0.61",
             "NVIDIA_REQUIRE_CUDA=cuda>=8.0",
             "LD_LIBRARY_PATH=/opt/cudnn/lib64:/usr/local/cuda/lib64/stubs:/usr/local/cuda/lib64"};
    r.labels = {{"org.opencontainers.image.title", "imgcheck demo: tensorflow-gpu 1.2"}};
    r.layers.push_back(
        {{File("etc/os-release", "NAME=\"Ubuntu\"\nVERSION_ID=\"16.04\"\nID=ubuntu\n"),
          File("etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"),
          File("etc/ld.so.conf.d/cuda.conf", "/usr/local/cuda/lib64\n"),
          Dir("usr/local/cuda-8.0/lib64/stubs"), Symlink("usr/local/cuda", "cuda-8.0"),
          FileFrom("usr/local/cuda-8.0/lib64/libcudart.so.8.0.61", cudart),
          Symlink("usr/local/cuda-8.0/lib64/libcudart.so.8.0", "libcudart.so.8.0.61"),
          FileFrom("usr/local/cuda-8.0/lib64/stubs/libcuda.so", stub),
          // What `ldconfig` leaves when the stubs directory is on its path.
          Symlink("usr/local/cuda-8.0/lib64/stubs/libcuda.so.1", "libcuda.so"),
          FileFrom("usr/lib/x86_64-linux-gnu/libcudnn.so.5.1.10", cudnn51),
          Symlink("usr/lib/x86_64-linux-gnu/libcudnn.so.5", "libcudnn.so.5.1.10"),
          File("var/lib/dpkg/status",
               "Package: libcudnn5\nStatus: hold ok installed\nArchitecture: amd64\n"
               "Version: 5.1.10-1+cuda8.0\n\n"
               "Package: cuda-cudart-8-0\nStatus: install ok installed\nArchitecture: amd64\n"
               "Version: 8.0.61-1\n\n"),
          File("var/lib/dpkg/info/libcudnn5.list",
               "/usr/lib/x86_64-linux-gnu/libcudnn.so.5.1.10\n/usr/lib/x86_64-linux-gnu/"
               "libcudnn.so.5\n"),
          File("var/lib/dpkg/info/cuda-cudart-8-0.list",
               "/usr/local/cuda-8.0/lib64/libcudart.so.8.0.61\n"
               "/usr/local/cuda-8.0/lib64/libcudart.so.8.0\n")},
         Compression::kGzip,
         "FROM nvidia/cuda:8.0-cudnn5-runtime-ubuntu16.04"});
    r.layers.push_back(EmptyLayer(
        "ENV LD_LIBRARY_PATH=/opt/cudnn/lib64:/usr/local/cuda/lib64/stubs:/usr/local/cuda/lib64"));
    r.layers.push_back(
        {{FileFrom(site + "tensorflow/python/_pywrap_tensorflow_internal.so", tf),
          File(site + "tensorflow/python/platform/build_info.py",
               "is_cuda_build = True\ncuda_version_number = '8.0'\ncudnn_version_number = '5'\n"),
          File(site + "tensorflow_gpu-1.2.0.dist-info/METADATA",
               "Metadata-Version: 2.0\nName: tensorflow-gpu\nVersion: 1.2.0\n"),
          File(site + "tensorflow_gpu-1.2.0.dist-info/RECORD",
               "tensorflow/python/_pywrap_tensorflow_internal.so,,\n"
               "tensorflow/python/platform/build_info.py,,\n"
               "tensorflow_gpu-1.2.0.dist-info/METADATA,,\n")},
         Compression::kGzip,
         "RUN pip install tensorflow-gpu==1.2.0"});
    r.layers.push_back({{FileFrom("opt/cudnn/lib64/libcudnn.so.5.0.5", cudnn50),
                         Symlink("opt/cudnn/lib64/libcudnn.so.5", "libcudnn.so.5.0.5")},
                        Compression::kZstd,
                        "COPY cudnn-5.0.5/lib64 /opt/cudnn/lib64"});
    fs::remove_all(out);
    WriteOciLayout(out, r, "latest");
  } catch (const std::exception& e) {
    std::cerr << "make_demo_image: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
