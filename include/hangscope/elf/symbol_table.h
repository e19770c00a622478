// Address-to-function lookup over an ELF file's function symbols.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "hangscope/elf/elf_file.h"

namespace hangscope::elf {

struct SymbolMatch {
  std::string_view name;  // mangled, as in the file
  std::uint64_t start = 0;
  std::uint64_t offset = 0;  // vaddr - start
};

class SymbolTable {
 public:
  SymbolTable() = default;
  // Function symbols of .symtab, or of .dynsym when there is no .symtab.
  static SymbolTable from_file(const ElfFile& file);
  // Adds the functions of another file for the same code (a separate debug file).
  void add_functions_of(const ElfFile& file, std::string_view table_name);

  std::optional<SymbolMatch> lookup(std::uint64_t vaddr) const;
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::uint64_t start;
    std::uint64_t size;
    std::string_view name;
  };
  void finish();

  std::vector<Entry> entries_;
};

// Demangles an Itanium C++ name; returns the input unchanged when it is not one.
std::string demangle(std::string_view name);

}  // namespace hangscope::elf
