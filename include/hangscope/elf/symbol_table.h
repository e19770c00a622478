// Address-to-function lookup over an ELF file's function symbols: a one-pass scan for a few
// addresses, a sorted index once the same file has been asked often enough to pay for it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
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
  // A scan reads every symbol once without its name and costs about a tenth of building the
  // sorted index (libtorch_cpu: ~3 ms against ~27 ms, measured), so the index is built on the
  // lookup after this many scans: a one-off `dump` never sorts, a long-lived agent soon does.
  static constexpr int kScansBeforeIndex = 8;

  SymbolTable() = default;
  SymbolTable(const SymbolTable&) = delete;
  SymbolTable& operator=(const SymbolTable&) = delete;

  // Function symbols of .symtab, or of .dynsym when there is no .symtab.
  explicit SymbolTable(const ElfFile& file) { add_functions_of(file, main_table_of(file)); }
  static std::string_view main_table_of(const ElfFile& file);
  // Adds the functions of one table of a file for the same code (also a separate debug file).
  // The file must outlive the table. Not thread-safe: add sources before the first lookup.
  void add_functions_of(const ElfFile& file, std::string_view table_name);

  // The function containing each address (same order). Among functions starting at one address
  // the sized one wins, then the shortest name, then the first in byte order; an unsized
  // function extends to the next one.
  // Thread-safe.
  std::vector<std::optional<SymbolMatch>> lookup_many(std::span<const std::uint64_t> vaddrs) const;
  std::optional<SymbolMatch> lookup(std::uint64_t vaddr) const;
  bool indexed() const { return indexed_.load(std::memory_order_acquire); }

 private:
  struct Entry {
    std::uint64_t start;
    std::uint64_t size;
    std::string_view name;
  };
  std::vector<std::optional<SymbolMatch>> scan(std::span<const std::uint64_t> vaddrs) const;
  void build_index() const;
  std::optional<SymbolMatch> lookup_indexed(std::uint64_t vaddr) const;

  std::vector<SymbolTableData> sources_;
  mutable std::atomic<int> scans_{0};
  mutable std::atomic<bool> indexed_{false};
  mutable std::mutex index_mutex_;
  mutable std::vector<Entry> entries_;  // written once under index_mutex_, then read-only
};

// Demangles an Itanium C++ name; returns the input unchanged when it is not one.
std::string demangle(std::string_view name);

}  // namespace hangscope::elf
