#include "elf_builder.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace imgcheck::elf::fixture {
namespace {

/// Appends integers in the spec's byte order and word size.
class Writer {
 public:
  Writer(bool is64, bool big_endian) : is64_(is64), big_endian_(big_endian) {}
  void U8(uint8_t v) { out_ += static_cast<char>(v); }
  void U16(uint64_t v) { Int(v, 2); }
  void U32(uint64_t v) { Int(v, 4); }
  void U64(uint64_t v) { Int(v, 8); }
  void Word(uint64_t v) { Int(v, is64_ ? 8 : 4); }  // Addr/Off/Xword/Sxword-sized field
  void Bytes(const std::string& s) { out_ += s; }
  void PadTo(size_t offset) { out_.resize(std::max(out_.size(), offset), '\0'); }
  void Align(size_t n) {
    while (out_.size() % n) out_ += '\0';
  }
  size_t size() const { return out_.size(); }
  std::string& str() { return out_; }

 private:
  void Int(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) {
      int shift = big_endian_ ? (n - 1 - i) * 8 : i * 8;
      out_ += static_cast<char>((v >> shift) & 0xff);
    }
  }
  bool is64_, big_endian_;
  std::string out_;
};

}  // namespace

std::string BuildFatbin(const std::vector<FatbinSpecEntry>& entries) {
  Writer body(true, false);  // fatbins are host data: little-endian on every CUDA host
  for (const auto& e : entries) {
    std::string payload = e.payload;
    while (payload.size() % 8) payload += '\0';
    body.U16(e.ptx ? 1 : 2);
    body.U16(0x0101);
    body.U32(64);                // entry header size
    body.U64(payload.size());    // payload size (padded)
    body.U32(e.payload.size());  // compressed size
    body.U32(0);
    body.U16(e.minor);
    body.U16(e.major);
    body.U32(e.sm);
    body.U32(0);                                   // name offset
    body.U32(0);                                   // name length
    body.U64(0x11 | (e.compressed ? 0x8000 : 0));  // 64-bit, linux, zstd
    body.U64(0);
    body.U64(e.compressed ? 4 * e.payload.size() : 0);  // decompressed size
    body.Bytes(payload);
  }
  Writer w(true, false);
  w.U32(0xBA55ED50);
  w.U16(1);
  w.U16(16);
  w.U64(body.size());
  w.Bytes(body.str());
  return w.str();
}

std::string BuildElf(const ElfSpec& spec) {
  const bool w64 = spec.is64;
  const uint64_t ehsize = w64 ? 64 : 52, phentsize = w64 ? 56 : 32,
                 phnum = (spec.interpreter.empty() ? 3 : 4) + (spec.tables_at ? 1 : 0);

  // String table first: offsets are needed by the symbols and the dynamic section.
  std::string dynstr(1, '\0');
  auto add_string = [&dynstr, &spec](const std::string& s) {
    if (spec.merge_tails && !s.empty())
      if (size_t tail = dynstr.find(s + '\0');
          tail != 0 && tail != std::string::npos && dynstr[tail - 1] != 0)
        return static_cast<uint64_t>(tail);
    uint64_t off = dynstr.size();
    dynstr += s;
    dynstr += '\0';
    return off;
  };
  // Appended, never merged: a tail search per filler string over megabytes of 'f's is quadratic.
  for (uint64_t i = 0; dynstr.size() < spec.filler_strings; ++i)
    dynstr += "filler_" + std::to_string(i) + "_" + std::string(200, 'f') + '\0';
  std::vector<std::pair<int64_t, uint64_t>> dynamic;  // tag, value (addresses patched below)
  for (const auto& n : spec.needed) dynamic.push_back({1, add_string(n)});       // DT_NEEDED
  if (!spec.soname.empty()) dynamic.push_back({14, add_string(spec.soname)});    // DT_SONAME
  if (!spec.rpath.empty()) dynamic.push_back({15, add_string(spec.rpath)});      // DT_RPATH
  if (!spec.runpath.empty()) dynamic.push_back({29, add_string(spec.runpath)});  // DT_RUNPATH
  if (spec.flags_1) dynamic.push_back({0x6ffffffb, spec.flags_1});               // DT_FLAGS_1
  struct Sym {
    uint64_t name;
    bool defined;
    bool weak = false;
    std::string version;  ///< "" for none
    bool hidden = false;  ///< "name@VERSION" of a definition: not the default version
  };
  std::vector<Sym> syms;
  auto add_symbol = [&](const std::string& s, bool defined, bool weak) {
    size_t at = s.find('@');
    Sym sym{add_string(s.substr(0, at)), defined, weak, "", false};
    if (at != std::string::npos) {
      bool is_default = s.compare(at, 2, "@@") == 0;
      sym.version = s.substr(at + (is_default ? 2 : 1));
      sym.hidden = defined && !is_default;
    }
    syms.push_back(sym);
  };
  for (const auto& s : spec.exported) add_symbol(s, true, false);
  for (const auto& s : spec.imported) add_symbol(s, false, false);
  for (const auto& s : spec.weak_imported) add_symbol(s, false, true);
  const bool versym =
      std::any_of(syms.begin(), syms.end(), [](const Sym& s) { return !s.version.empty(); });

  // Version tables (Elf_Verdef/Verdaux, Elf_Verneed/Vernaux): the same layout in both classes.
  Writer versions(w64, spec.big_endian);
  uint16_t version_index = 1;
  std::map<std::string, uint16_t> version_indices;  // a version's name -> its DT_VERSYM index
  for (size_t i = 0; i < spec.version_definitions.size(); ++i) {
    version_indices.emplace(spec.version_definitions[i], version_index);
    versions.U16(1);                                                 // vd_version
    versions.U16(i == 0 ? 1 : 0);                                    // vd_flags: VER_FLG_BASE
    versions.U16(version_index++);                                   // vd_ndx
    versions.U16(1);                                                 // vd_cnt
    versions.U32(0);                                                 // vd_hash (not read)
    versions.U32(20);                                                // vd_aux
    versions.U32(i + 1 < spec.version_definitions.size() ? 28 : 0);  // vd_next
    versions.U32(add_string(spec.version_definitions[i]));           // vda_name
    versions.U32(0);                                                 // vda_next
  }
  const uint64_t verneed_rel = versions.size();
  for (size_t i = 0; i < spec.version_needs.size(); ++i) {
    const auto& [file, names] = spec.version_needs[i];
    versions.U16(1);  // vn_version
    versions.U16(names.size());
    versions.U32(add_string(file));
    versions.U32(16);  // vn_aux
    versions.U32(i + 1 < spec.version_needs.size() ? 16 + 16 * names.size() : 0);
    for (size_t j = 0; j < names.size(); ++j) {
      versions.U32(0);  // vna_hash (not read)
      versions.U16(0);  // vna_flags
      versions.U16(++version_index);
      version_indices.emplace(names[j], version_index);
      versions.U32(add_string(names[j]));
      versions.U32(j + 1 < names.size() ? 16 : 0);
    }
  }
  const size_t version_tags = (spec.version_definitions.empty() ? 0 : 2) +
                              (spec.version_needs.empty() ? 0 : 2) + (versym ? 1 : 0);
  Writer note(w64, spec.big_endian);
  if (!spec.build_id.empty()) {
    note.U32(4);
    note.U32(spec.build_id.size());
    note.U32(3);  // NT_GNU_BUILD_ID
    note.Bytes(std::string("GNU\0", 4));
    note.Bytes(spec.build_id);
    note.Align(4);
  }

  // Layout: offsets are also virtual addresses (one PT_LOAD at 0). The dynamic section's size
  // is known before its contents: the fixed entries below plus those collected above.
  const uint64_t symsize = w64 ? 24 : 16, nsyms = syms.size() + 1;
  const uint64_t hash_size = 4 * (2 + 1 + nsyms);  // nbucket=1, nchain=nsyms
  const uint64_t dynamic_size = (dynamic.size() + version_tags + 6) * (w64 ? 16 : 8);
  auto align8 = [](uint64_t v) { return (v + 7) / 8 * 8; };
  const uint64_t note_off = ehsize + phentsize * phnum;
  const std::string shstrtab = std::string("\0.dynstr\0.dynsym\0.shstrtab\0", 27);
  const uint64_t shentsize = w64 ? 64 : 40, shnum = spec.section_headers ? 4 : 0;
  const uint64_t shstrtab_off = align8(note_off + note.size());
  const uint64_t shoff = align8(shstrtab_off + (shnum ? shstrtab.size() : 0));
  uint64_t next = std::max(align8(shoff + shentsize * shnum), spec.tables_at), dynamic_off = 0;
  if (spec.dynamic_first) {
    dynamic_off = next;
    next = align8(next + dynamic_size);
  }
  const uint64_t dynstr_off = next;
  const uint64_t dynsym_off = align8(dynstr_off + dynstr.size());
  const uint64_t hash_off = dynsym_off + symsize * nsyms;
  const uint64_t versions_off = align8(hash_off + hash_size);
  const uint64_t versym_off = align8(versions_off + versions.size());
  next = align8(versym_off + (versym ? 2 * nsyms : 0));
  if (!spec.dynamic_first) {
    dynamic_off = next;
    next = align8(next + dynamic_size);
  }
  const uint64_t fatbin_off = next;
  const uint64_t interp_off = fatbin_off + spec.fatbin.size();
  const uint64_t file_size =
      interp_off + (spec.interpreter.empty() ? 0 : spec.interpreter.size() + 1);
  dynamic.push_back({5, dynstr_off});      // DT_STRTAB
  dynamic.push_back({10, dynstr.size()});  // DT_STRSZ
  dynamic.push_back({6, dynsym_off});      // DT_SYMTAB
  dynamic.push_back({11, symsize});        // DT_SYMENT
  dynamic.push_back({4, hash_off});        // DT_HASH
  if (!spec.version_definitions.empty()) {
    dynamic.push_back({0x6ffffffc, versions_off});                     // DT_VERDEF
    dynamic.push_back({0x6ffffffd, spec.version_definitions.size()});  // DT_VERDEFNUM
  }
  if (!spec.version_needs.empty()) {
    dynamic.push_back({0x6ffffffe, versions_off + verneed_rel});  // DT_VERNEED
    dynamic.push_back({0x6fffffff, spec.version_needs.size()});   // DT_VERNEEDNUM
  }
  if (versym) dynamic.push_back({0x6ffffff0, versym_off});  // DT_VERSYM
  dynamic.push_back({0, 0});                                // DT_NULL

  Writer w(w64, spec.big_endian);
  // e_ident
  w.Bytes(
      "\x7f"
      "ELF");
  w.U8(w64 ? 2 : 1);
  w.U8(spec.big_endian ? 2 : 1);
  w.U8(1);  // EV_CURRENT
  w.Align(16);
  w.U16(spec.type);
  w.U16(spec.machine);
  w.U32(1);                   // e_version
  w.Word(0);                  // e_entry
  w.Word(ehsize);             // e_phoff
  w.Word(shnum ? shoff : 0);  // e_shoff
  w.U32(0);                   // e_flags
  w.U16(ehsize);
  w.U16(phentsize);
  w.U16(phnum);
  w.U16(shentsize);
  w.U16(shnum);
  w.U16(shnum ? 3 : 0);  // e_shstrndx

  auto phdr = [&](uint32_t type, uint64_t off, uint64_t size, uint64_t align) {
    w.U32(type);
    if (w64) w.U32(4);  // p_flags (R)
    w.Word(off);        // p_offset
    w.Word(off);        // p_vaddr
    w.Word(off);        // p_paddr
    w.Word(size);       // p_filesz
    w.Word(size);       // p_memsz
    if (!w64) w.U32(4);
    w.Word(align);
  };
  if (!spec.interpreter.empty())
    phdr(3, interp_off, spec.interpreter.size() + 1, 1);  // PT_INTERP, before PT_LOAD
  if (spec.tables_at) {
    phdr(1, 0, spec.tables_at, 0x1000);                           // PT_LOAD
    phdr(1, spec.tables_at, file_size - spec.tables_at, 0x1000);  // PT_LOAD
  } else {
    phdr(1, 0, file_size, 0x1000);  // PT_LOAD
  }
  phdr(2, dynamic_off, dynamic_size, 8);  // PT_DYNAMIC
  phdr(4, note_off, note.size(), 4);      // PT_NOTE

  w.Bytes(note.str());
  if (shnum) {
    w.PadTo(shstrtab_off);
    w.Bytes(shstrtab);
    w.PadTo(shoff);
    // sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info, sh_addralign,
    // sh_entsize: the null section, .dynstr, .dynsym (its strings: section 1), .shstrtab.
    auto shdr = [&](uint32_t name, uint32_t type, uint64_t off, uint64_t size, uint32_t link,
                    uint64_t entsize) {
      w.U32(name);
      w.U32(type);
      const bool alloc = type != 0 && name != 17;  // SHF_ALLOC but for .shstrtab
      w.Word(alloc ? 2 : 0);
      w.Word(alloc ? off : 0);
      w.Word(off);
      w.Word(size);
      w.U32(link);
      w.U32(type == 11 ? 1 : 0);
      w.Word(8);
      w.Word(entsize);
    };
    shdr(0, 0, 0, 0, 0, 0);
    shdr(1, 3, dynstr_off, dynstr.size(), 0, 0);
    shdr(9, 11, dynsym_off, symsize * nsyms, 1, symsize);
    shdr(17, 3, shstrtab_off, shstrtab.size(), 0, 0);
  }
  auto write_dynamic = [&] {
    w.PadTo(dynamic_off);
    for (const auto& [tag, value] : dynamic) {
      w.Word(static_cast<uint64_t>(tag));
      w.Word(value);
    }
  };
  if (spec.dynamic_first) write_dynamic();
  w.PadTo(dynstr_off);
  w.Bytes(dynstr);
  w.PadTo(dynsym_off);
  // Symbol 0 is the null symbol.
  auto sym = [&](uint64_t name, bool defined, bool weak) {
    // STB_GLOBAL (STB_WEAK), STT_FUNC
    const uint8_t info = defined || name ? ((weak ? 2 : 1) << 4) | 2 : 0;
    const uint16_t shndx = defined ? 1 : 0;
    const uint64_t value = defined ? 0x1000 : 0;
    w.U32(name);
    if (w64) {
      w.U8(info);
      w.U8(0);
      w.U16(shndx);
      w.U64(value);
      w.U64(0);
    } else {
      w.U32(value);
      w.U32(0);
      w.U8(info);
      w.U8(0);
      w.U16(shndx);
    }
  };
  sym(0, false, false);
  for (const auto& s : syms) sym(s.name, s.defined, s.weak);
  // DT_HASH with one bucket; the loader would need real chains, Parse only reads nchain.
  w.U32(1);
  w.U32(nsyms);
  w.U32(0);
  for (uint64_t i = 0; i < nsyms; ++i) w.U32(0);
  w.PadTo(versions_off);
  w.Bytes(versions.str());
  if (versym) {
    // One index per symbol: 0 (local) for the null symbol, 1 (global) for no version, else the
    // version's, with bit 15 set for a hidden definition. A version named nowhere is a bug of
    // the recipe.
    w.PadTo(versym_off);
    w.U16(0);
    for (const auto& s : syms) {
      uint16_t index = 1;
      if (!s.version.empty()) {
        auto it = version_indices.find(s.version);
        if (it == version_indices.end())
          throw std::invalid_argument("symbol version " + s.version +
                                      " is neither defined nor needed");
        index = static_cast<uint16_t>(it->second | (s.hidden ? 0x8000 : 0));
      }
      w.U16(index);
    }
  }
  if (!spec.dynamic_first) write_dynamic();
  w.PadTo(fatbin_off);
  w.Bytes(spec.fatbin);
  if (!spec.interpreter.empty()) w.Bytes(spec.interpreter + std::string(1, '\0'));
  return w.str();
}

}  // namespace imgcheck::elf::fixture
