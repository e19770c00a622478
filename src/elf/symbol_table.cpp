#include "hangscope/elf/symbol_table.h"

#include <cxxabi.h>
#include <elf.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>

namespace hangscope::elf {
namespace {

// A function symbol's start and size, read without its name.
struct FunctionExtent {
  std::uint64_t start = 0;
  std::uint64_t size = 0;
  std::uint32_t name_offset = 0;
};

std::optional<FunctionExtent> function_at(const SymbolTableData& table, std::size_t index) {
  Elf64_Sym sym;
  std::memcpy(&sym, table.entries.data() + index * sizeof(Elf64_Sym), sizeof(sym));
  const auto type = ELF64_ST_TYPE(sym.st_info);
  if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_value == 0) return std::nullopt;
  return FunctionExtent{sym.st_value, sym.st_size, sym.st_name};
}

std::size_t entry_count(const SymbolTableData& table) {
  return table.entries.size() / sizeof(Elf64_Sym);
}

// Whether `a` is preferred to `b` among functions starting at one address: sized, then the
// shorter name, then the first in byte order (a total order: scan and index pick the same).
bool preferred(std::uint64_t a_size, std::string_view a_name, std::uint64_t b_size,
               std::string_view b_name) {
  if ((a_size == 0) != (b_size == 0)) return a_size != 0;
  if (a_name.size() != b_name.size()) return a_name.size() < b_name.size();
  return a_name < b_name;
}

// The index of the first of `sorted` (ascending, not empty) at or above `value`; sorted.size()
// when every one is below it. Its steps are selects, not branches: the scan runs it once per
// function symbol, and a mispredicted branch per step cost more than reading the symbol.
std::size_t first_at_or_above(std::span<const std::uint64_t> sorted, std::uint64_t value) {
  const std::uint64_t* base = sorted.data();
  std::size_t n = sorted.size();
  while (n > 1) {
    const std::size_t half = n / 2;
    base = base[half] < value ? base + half : base;
    n -= half;
  }
  return static_cast<std::size_t>(base - sorted.data()) + (*base < value ? 1 : 0);
}

}  // namespace

std::string_view SymbolTable::main_table_of(const ElfFile& file) {
  return file.section(".symtab") != nullptr ? ".symtab" : ".dynsym";
}

void SymbolTable::add_functions_of(const ElfFile& file, std::string_view table_name) {
  const auto data = file.symbol_table_data(table_name);
  if (entry_count(data) > 0) sources_.push_back(data);
}

std::optional<SymbolMatch> SymbolTable::lookup(std::uint64_t vaddr) const {
  return lookup_many(std::span<const std::uint64_t>(&vaddr, 1)).front();
}

std::vector<std::optional<SymbolMatch>> SymbolTable::lookup_many(
    std::span<const std::uint64_t> vaddrs) const {
  if (!indexed()) {
    if (scans_.fetch_add(1, std::memory_order_relaxed) < kScansBeforeIndex) return scan(vaddrs);
    build_index();
  }
  std::vector<std::optional<SymbolMatch>> out;
  out.reserve(vaddrs.size());
  for (const auto vaddr : vaddrs) out.push_back(lookup_indexed(vaddr));
  return out;
}

// One pass over every source: each function symbol is put in the bucket of the first queried
// address at or above its start, where only the highest start (then the preferred alias) is
// kept. The match for a query is the best of its own and all lower buckets: the function with
// the highest start at or below it. No names are read except for a bucket's current best.
std::vector<std::optional<SymbolMatch>> SymbolTable::scan(
    std::span<const std::uint64_t> vaddrs) const {
  std::vector<std::uint64_t> sorted(vaddrs.begin(), vaddrs.end());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<std::optional<Entry>> best(sorted.size());
  if (sorted.empty()) return {};
  const std::uint64_t highest = sorted.back();
  for (const auto& table : sources_) {
    const std::size_t count = entry_count(table);
    const std::byte* entry = table.entries.data();
    for (std::size_t i = 0; i < count; ++i, entry += sizeof(Elf64_Sym)) {
      // The type and the start first, straight from the entry: most symbols end here.
      unsigned char info;
      std::uint64_t start;
      std::memcpy(&info, entry + offsetof(Elf64_Sym, st_info), sizeof info);
      std::memcpy(&start, entry + offsetof(Elf64_Sym, st_value), sizeof start);
      const auto type = ELF64_ST_TYPE(info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || start == 0 || start > highest) continue;
      const auto fn = function_at(table, i);
      auto& slot = best[first_at_or_above(sorted, fn->start)];
      if (slot && slot->start > fn->start) continue;
      const auto name = ElfFile::string_in(table.strings, fn->name_offset);
      if (name.empty()) continue;
      if (slot && slot->start == fn->start && !preferred(fn->size, name, slot->size, slot->name)) {
        continue;
      }
      slot = Entry{fn->start, fn->size, name};
    }
  }
  std::vector<std::optional<SymbolMatch>> by_sorted(sorted.size());
  std::optional<Entry> running;
  for (std::size_t j = 0; j < sorted.size(); ++j) {
    if (best[j]) running = best[j];  // a higher bucket's best always starts higher
    if (running && (running->size == 0 || sorted[j] - running->start < running->size)) {
      by_sorted[j] = SymbolMatch{running->name, running->start, sorted[j] - running->start};
    }
  }
  std::vector<std::optional<SymbolMatch>> out;
  out.reserve(vaddrs.size());
  for (const auto vaddr : vaddrs) {
    out.push_back(
        by_sorted[std::lower_bound(sorted.begin(), sorted.end(), vaddr) - sorted.begin()]);
  }
  return out;
}

void SymbolTable::build_index() const {
  std::lock_guard lock(index_mutex_);
  if (indexed()) return;
  std::vector<Entry> entries;
  for (const auto& table : sources_) {
    const std::size_t count = entry_count(table);
    for (std::size_t i = 0; i < count; ++i) {
      const auto fn = function_at(table, i);
      if (!fn) continue;
      const auto name = ElfFile::string_in(table.strings, fn->name_offset);
      if (!name.empty()) entries.push_back({fn->start, fn->size, name});
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.start != b.start) return a.start < b.start;
    return preferred(a.size, a.name, b.size, b.name);
  });
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const Entry& a, const Entry& b) { return a.start == b.start; }),
                entries.end());
  entries_ = std::move(entries);
  indexed_.store(true, std::memory_order_release);
}

std::optional<SymbolMatch> SymbolTable::lookup_indexed(std::uint64_t vaddr) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), vaddr,
                             [](std::uint64_t a, const Entry& e) { return a < e.start; });
  if (it == entries_.begin()) return std::nullopt;
  --it;
  if (it->size != 0 && vaddr - it->start >= it->size) return std::nullopt;
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
