#include "hangscope/elf/symbol_table.h"

#include <cxxabi.h>
#include <elf.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

namespace hangscope::elf {

SymbolTable SymbolTable::from_file(const ElfFile& file) {
  SymbolTable table;
  table.add_functions_of(file, file.section(".symtab") ? ".symtab" : ".dynsym");
  return table;
}

void SymbolTable::add_functions_of(const ElfFile& file, std::string_view table_name) {
  for (const auto& sym : file.symbols(table_name)) {
    if ((sym.type == STT_FUNC || sym.type == STT_GNU_IFUNC) && sym.value != 0) {
      entries_.push_back({sym.value, sym.size, sym.name});
    }
  }
  finish();
}

void SymbolTable::finish() {
  // Sort by start; among aliases at one address prefer the sized, then the shortest name.
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    if (a.start != b.start) return a.start < b.start;
    if ((a.size == 0) != (b.size == 0)) return a.size != 0;
    return a.name.size() < b.name.size();
  });
  entries_.erase(std::unique(entries_.begin(), entries_.end(),
                             [](const Entry& a, const Entry& b) { return a.start == b.start; }),
                 entries_.end());
}

std::optional<SymbolMatch> SymbolTable::lookup(std::uint64_t vaddr) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), vaddr,
                             [](std::uint64_t a, const Entry& e) { return a < e.start; });
  if (it == entries_.begin()) return std::nullopt;
  --it;
  const bool inside = it->size != 0
                          ? vaddr - it->start < it->size
                          : (std::next(it) == entries_.end() || vaddr < std::next(it)->start);
  if (!inside) return std::nullopt;
  return SymbolMatch{it->name, it->start, vaddr - it->start};
}

std::string demangle(std::string_view name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return std::string(name);
  const std::string mangled(name);
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

}  // namespace hangscope::elf
