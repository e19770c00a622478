// A bounds-checked reader of one ELF64 image held in memory: headers, sections, segments, symbols.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hangscope::elf {

struct Section {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t flags = 0;
  std::uint64_t address = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t link = 0;
  std::uint64_t entry_size = 0;
};

struct Segment {
  std::uint32_t type = 0;
  std::uint32_t flags = 0;
  std::uint64_t offset = 0;
  std::uint64_t vaddr = 0;
  std::uint64_t file_size = 0;
  std::uint64_t memory_size = 0;
  std::uint64_t align = 0;
};

struct Symbol {
  std::string_view name;  // points into the image
  std::uint64_t value = 0;
  std::uint64_t size = 0;
  std::uint8_t type = 0;  // STT_*
};

// The raw entries (Elf64_Sym) and string table of one symbol table, for passes that read a
// name only where one is needed.
struct SymbolTableData {
  std::span<const std::byte> entries;
  std::span<const std::byte> strings;
};

class ElfFile {
 public:
  // Parses the headers of `image`; throws hangscope::Error naming the defect otherwise.
  // The image must outlive the ElfFile and every string_view it hands out.
  static ElfFile parse(std::span<const std::byte> image);

  std::span<const std::byte> image() const { return image_; }
  std::uint16_t machine() const { return machine_; }
  std::uint16_t type() const { return type_; }
  const std::vector<Section>& sections() const { return sections_; }
  const std::vector<Segment>& segments() const { return segments_; }

  const Section* section(std::string_view name) const;
  const Segment* first_segment(std::uint32_t type) const;
  // The section's bytes; empty for SHT_NOBITS or when the header points outside the image.
  std::span<const std::byte> section_data(const Section& section) const;
  std::span<const std::byte> segment_data(const Segment& segment) const;

  // Where a virtual address of a PT_LOAD segment lies in the file (nullopt for .bss or gaps).
  std::optional<std::uint64_t> file_offset_of(std::uint64_t vaddr) const;
  // The virtual address that a file offset inside a PT_LOAD segment is loaded at.
  std::optional<std::uint64_t> vaddr_of_file_offset(std::uint64_t offset) const;

  // GNU build id as lowercase hex ("" when absent).
  std::string build_id() const;
  // Name in .gnu_debuglink ("" when absent).
  std::string debuglink() const;

  // The raw bytes of one symbol table (".symtab" or ".dynsym"); empty when absent.
  SymbolTableData symbol_table_data(std::string_view table_name) const;
  // The NUL-terminated name at `offset` of a string table ("" when outside it or unterminated).
  static std::string_view string_in(std::span<const std::byte> strings, std::uint64_t offset);
  // Symbols of one table (".symtab" or ".dynsym"); malformed entries are skipped.
  std::vector<Symbol> symbols(std::string_view table_name) const;
  // A symbol by exact name, from .dynsym then .symtab.
  std::optional<Symbol> find_symbol(std::string_view name) const;
  // Several symbols by name in one pass over the tables (same order as `names`).
  std::vector<std::optional<Symbol>> find_symbols(std::span<const std::string_view> names) const;

 private:
  explicit ElfFile(std::span<const std::byte> image) : image_(image) {}

  std::span<const std::byte> image_;
  std::uint16_t machine_ = 0;
  std::uint16_t type_ = 0;
  std::vector<Section> sections_;
  std::vector<Segment> segments_;
};

}  // namespace hangscope::elf
