// The machine ABIs imgcheck models, in one table: an ELF e_machine and class, the OCI
// architecture of images built for it, and the glibc facts the loader simulation needs. An
// image of any other ABI is reported, not guessed (glibc sysdeps/<arch>/dl-*.h, Debian
// multiarch triplets https://wiki.debian.org/Multiarch/Tuples, OCI image-spec config.md).
#pragma once

#include <cstdint>
#include <string_view>

namespace imgcheck::elf {

struct Abi {
  uint16_t machine;               ///< e_machine
  bool is64;                      ///< ELFCLASS64
  std::string_view name;          ///< for messages ("x86-64")
  std::string_view architecture;  ///< OCI config.architecture ("amd64")
  std::string_view triplet;       ///< Debian/Ubuntu multiarch directory
  std::string_view platform;      ///< $PLATFORM (AT_PLATFORM)
  std::string_view interpreter;   ///< the program interpreter (PT_INTERP)
  int32_t cache_flags;            ///< ld.so.cache flags of its libraries (_DL_CACHE_DEFAULT_ID)
  /// The glibc-hwcaps subdirectory assumed present (the host CPU is unknown: the baseline
  /// every CUDA-capable host of the ABI has); empty for none.
  std::string_view hwcaps;
};

inline constexpr Abi kX8664 = {62,
                               true,
                               "x86-64",
                               "amd64",
                               "x86_64-linux-gnu",
                               "x86_64",
                               "/lib64/ld-linux-x86-64.so.2",
                               0x0303,
                               "x86-64-v2"};
inline constexpr Abi kAbis[] = {
    kX8664,
    {183, true, "aarch64", "arm64", "aarch64-linux-gnu", "aarch64", "/lib/ld-linux-aarch64.so.1",
     0x0a03, ""},
    {3, false, "i386", "386", "i386-linux-gnu", "i686", "/lib/ld-linux.so.2", 0x0003, ""},
    {40, false, "arm", "arm", "arm-linux-gnueabihf", "v7l", "/lib/ld-linux-armhf.so.3", 0x0003, ""},
};

/// The modelled ABI of this e_machine and class, or null.
inline const Abi* FindAbi(uint16_t machine, bool is64) {
  for (const Abi& a : kAbis) {
    if (a.machine == machine && a.is64 == is64) return &a;
  }
  return nullptr;
}

/// The modelled ABI of an OCI architecture ("arm64"; also its $PLATFORM name, "aarch64"), or
/// null.
inline const Abi* FindArchitecture(std::string_view architecture) {
  for (const Abi& a : kAbis) {
    if (a.architecture == architecture || a.platform == architecture) return &a;
  }
  return nullptr;
}

}  // namespace imgcheck::elf
