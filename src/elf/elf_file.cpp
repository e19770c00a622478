#include "hangscope/elf/elf_file.h"

#include <elf.h>

#include <cstring>

#include "hangscope/common/error.h"

namespace hangscope::elf {
namespace {

// Copies a trivially copyable T out of image at offset, or returns nullopt when out of bounds.
template <typename T>
std::optional<T> read_at(std::span<const std::byte> image, std::uint64_t offset) {
  if (offset > image.size() || sizeof(T) > image.size() - offset) return std::nullopt;
  T value;
  std::memcpy(&value, image.data() + offset, sizeof(T));
  return value;
}

bool range_ok(std::span<const std::byte> image, std::uint64_t offset, std::uint64_t size) {
  return offset <= image.size() && size <= image.size() - offset;
}

// A NUL-terminated string at offset inside a string table, bounded by the table.
std::string_view string_at(std::span<const std::byte> table, std::uint64_t offset) {
  if (offset >= table.size()) return {};
  const char* begin = reinterpret_cast<const char*>(table.data() + offset);
  const std::size_t max = table.size() - offset;
  const void* nul = std::memchr(begin, 0, max);
  return nul ? std::string_view(begin, static_cast<const char*>(nul) - begin) : std::string_view();
}

}  // namespace

ElfFile ElfFile::parse(std::span<const std::byte> image) {
  const auto header = read_at<Elf64_Ehdr>(image, 0);
  if (!header || std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0) {
    throw Error("not an ELF file (bad magic)");
  }
  if (header->e_ident[EI_CLASS] != ELFCLASS64) throw Error("unsupported ELF class (only ELF64)");
  if (header->e_ident[EI_DATA] != ELFDATA2LSB) {
    throw Error("unsupported ELF byte order (only little-endian)");
  }
  ElfFile file(image);
  file.machine_ = header->e_machine;
  file.type_ = header->e_type;

  if (header->e_phnum > 0) {
    if (header->e_phentsize != sizeof(Elf64_Phdr) ||
        !range_ok(image, header->e_phoff, std::uint64_t{header->e_phnum} * sizeof(Elf64_Phdr))) {
      throw Error("program header table lies outside the file");
    }
    for (unsigned i = 0; i < header->e_phnum; ++i) {
      const auto ph = *read_at<Elf64_Phdr>(image, header->e_phoff + i * sizeof(Elf64_Phdr));
      file.segments_.push_back(
          {ph.p_type, ph.p_flags, ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz, ph.p_align});
    }
  }

  // Section headers are optional (stripped or truncated files still unwind and symbolize).
  if (header->e_shnum > 0 && header->e_shentsize == sizeof(Elf64_Shdr) &&
      range_ok(image, header->e_shoff, std::uint64_t{header->e_shnum} * sizeof(Elf64_Shdr))) {
    std::vector<Elf64_Shdr> raw(header->e_shnum);
    for (unsigned i = 0; i < header->e_shnum; ++i) {
      raw[i] = *read_at<Elf64_Shdr>(image, header->e_shoff + i * sizeof(Elf64_Shdr));
    }
    std::span<const std::byte> names;
    if (header->e_shstrndx < raw.size()) {
      const auto& strtab = raw[header->e_shstrndx];
      if (range_ok(image, strtab.sh_offset, strtab.sh_size)) {
        names = image.subspan(strtab.sh_offset, strtab.sh_size);
      }
    }
    for (const auto& sh : raw) {
      file.sections_.push_back({std::string(string_at(names, sh.sh_name)), sh.sh_type, sh.sh_flags,
                                sh.sh_addr, sh.sh_offset, sh.sh_size, sh.sh_link, sh.sh_entsize});
    }
  }
  return file;
}

const Section* ElfFile::section(std::string_view name) const {
  for (const auto& s : sections_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const Segment* ElfFile::first_segment(std::uint32_t type) const {
  for (const auto& s : segments_) {
    if (s.type == type) return &s;
  }
  return nullptr;
}

std::span<const std::byte> ElfFile::section_data(const Section& section) const {
  if (section.type == SHT_NOBITS || !range_ok(image_, section.offset, section.size)) return {};
  return image_.subspan(section.offset, section.size);
}

std::span<const std::byte> ElfFile::segment_data(const Segment& segment) const {
  if (!range_ok(image_, segment.offset, segment.file_size)) return {};
  return image_.subspan(segment.offset, segment.file_size);
}

std::optional<std::uint64_t> ElfFile::file_offset_of(std::uint64_t vaddr) const {
  for (const auto& s : segments_) {
    if (s.type == PT_LOAD && vaddr >= s.vaddr && vaddr - s.vaddr < s.file_size) {
      return s.offset + (vaddr - s.vaddr);
    }
  }
  return std::nullopt;
}

std::optional<std::uint64_t> ElfFile::vaddr_of_file_offset(std::uint64_t offset) const {
  for (const auto& s : segments_) {
    if (s.type == PT_LOAD && offset >= s.offset && offset - s.offset < s.file_size) {
      return s.vaddr + (offset - s.offset);
    }
  }
  return std::nullopt;
}

std::string ElfFile::build_id() const {
  for (const auto& s : sections_) {
    if (s.type != SHT_NOTE) continue;
    const auto data = section_data(s);
    std::uint64_t pos = 0;
    while (const auto note = read_at<Elf64_Nhdr>(data, pos)) {
      const std::uint64_t name_at = pos + sizeof(Elf64_Nhdr);
      const std::uint64_t desc_at = name_at + ((note->n_namesz + 3u) & ~3u);
      if (!range_ok(data, desc_at, note->n_descsz)) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
          std::memcmp(data.data() + name_at, "GNU", 4) == 0) {
        static constexpr char kHex[] = "0123456789abcdef";
        std::string hex;
        for (std::uint32_t i = 0; i < note->n_descsz; ++i) {
          const auto byte = static_cast<unsigned>(data[desc_at + i]);
          hex += kHex[byte >> 4];
          hex += kHex[byte & 15];
        }
        return hex;
      }
      pos = desc_at + ((note->n_descsz + 3u) & ~3u);
    }
  }
  return {};
}

std::string ElfFile::debuglink() const {
  const Section* link = section(".gnu_debuglink");
  if (link == nullptr) return {};
  return std::string(string_at(section_data(*link), 0));
}

SymbolTableData ElfFile::symbol_table_data(std::string_view table_name) const {
  const Section* table = section(table_name);
  if (table == nullptr || table->link >= sections_.size()) return {};
  return {section_data(*table), section_data(sections_[table->link])};
}

std::string_view ElfFile::string_in(std::span<const std::byte> strings, std::uint64_t offset) {
  return string_at(strings, offset);
}

std::vector<Symbol> ElfFile::symbols(std::string_view table_name) const {
  std::vector<Symbol> out;
  const auto table = symbol_table_data(table_name);
  const std::size_t count = table.entries.size() / sizeof(Elf64_Sym);
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto sym = *read_at<Elf64_Sym>(table.entries, i * sizeof(Elf64_Sym));
    const auto name = string_at(table.strings, sym.st_name);
    if (name.empty()) continue;
    out.push_back(
        {name, sym.st_value, sym.st_size, static_cast<std::uint8_t>(ELF64_ST_TYPE(sym.st_info))});
  }
  return out;
}

std::optional<Symbol> ElfFile::find_symbol(std::string_view name) const {
  for (const char* table_name : {".dynsym", ".symtab"}) {
    const auto table = symbol_table_data(table_name);
    const std::size_t count = table.entries.size() / sizeof(Elf64_Sym);
    for (std::size_t i = 0; i < count; ++i) {
      const auto sym = *read_at<Elf64_Sym>(table.entries, i * sizeof(Elf64_Sym));
      if (sym.st_value == 0 || string_at(table.strings, sym.st_name) != name) continue;
      return Symbol{string_at(table.strings, sym.st_name), sym.st_value, sym.st_size,
                    static_cast<std::uint8_t>(ELF64_ST_TYPE(sym.st_info))};
    }
  }
  return std::nullopt;
}

std::vector<std::optional<Symbol>> ElfFile::find_symbols(
    std::span<const std::string_view> names) const {
  std::vector<std::optional<Symbol>> found(names.size());
  std::size_t left = names.size();
  for (const char* table_name : {".dynsym", ".symtab"}) {
    const auto table = symbol_table_data(table_name);
    const std::size_t count = table.entries.size() / sizeof(Elf64_Sym);
    for (std::size_t i = 0; i < count && left > 0; ++i) {
      const auto sym = *read_at<Elf64_Sym>(table.entries, i * sizeof(Elf64_Sym));
      if (sym.st_value == 0) continue;
      const std::string_view name = string_at(table.strings, sym.st_name);
      for (std::size_t k = 0; k < names.size(); ++k) {
        if (found[k] || names[k] != name) continue;
        found[k] = Symbol{name, sym.st_value, sym.st_size,
                          static_cast<std::uint8_t>(ELF64_ST_TYPE(sym.st_info))};
        --left;
      }
    }
  }
  return found;
}

}  // namespace hangscope::elf
