// Fuzz target: ELF files as the symbolizer and unwinder open them from a target's mappings
// (executables, shared libraries, separate debug files). Feeds a file's bytes to
// elf::ElfFile::parse, then reads what capture reads: sections and their data, segments,
// address <-> file offset, build id, debuglink, both symbol tables, find_symbol, SymbolTable
// lookups (the one-pass scan, then the sorted index: both must agree), demangling, and
// .eh_frame_hdr (from PT_GNU_EH_FRAME and from the section). Then the same bytes as a file
// through elf::Module::open (mapped from a memfd) and Module::read_vaddr.
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <set>

#include "fuzz_support.h"
#include "hangscope/common/error.h"
#include "hangscope/elf/eh_frame_hdr.h"
#include "hangscope/elf/elf_file.h"
#include "hangscope/elf/module.h"
#include "hangscope/elf/symbol_table.h"

namespace {

using namespace hangscope;

void read_everything(const elf::ElfFile& file) {
  std::vector<std::uint64_t> addresses = {0, 1, 0x1000, ~std::uint64_t{0}};
  for (const auto& s : file.sections()) {
    const auto bytes = file.section_data(s);
    if (!bytes.empty()) (void)static_cast<volatile std::byte>(bytes.back());
    addresses.push_back(s.address);
    addresses.push_back(s.address + s.size / 2);
    if (s.name == ".eh_frame_hdr") (void)elf::parse_eh_frame_hdr(bytes, s.address);
  }
  for (const auto& seg : file.segments()) {
    const auto bytes = file.segment_data(seg);
    if (!bytes.empty()) (void)static_cast<volatile std::byte>(bytes.front());
    (void)file.file_offset_of(seg.vaddr);
    (void)file.vaddr_of_file_offset(seg.offset);
  }
  if (const auto* hdr = file.first_segment(PT_GNU_EH_FRAME)) {
    (void)elf::parse_eh_frame_hdr(file.segment_data(*hdr), hdr->vaddr);
  }
  (void)file.build_id();
  (void)file.debuglink();
  for (const char* table : {".symtab", ".dynsym"}) {
    std::size_t n = 0;
    for (const auto& sym : file.symbols(table)) {
      if (n++ < 64) {
        addresses.push_back(sym.value);
        addresses.push_back(sym.value + sym.size / 2);
        addresses.push_back(sym.value + sym.size);
        (void)elf::demangle(sym.name);
        (void)file.find_symbol(sym.name);
      }
    }
  }
  (void)file.find_symbol("_PyRuntime");

  // The scan (first lookups) and the index (after kScansBeforeIndex) must give the same answers.
  elf::SymbolTable table(file);
  const auto scanned = table.lookup_many(addresses);
  for (int i = 0; i < elf::SymbolTable::kScansBeforeIndex; ++i) (void)table.lookup(addresses[0]);
  const auto indexed = table.lookup_many(addresses);
  if (!table.indexed() || scanned.size() != indexed.size()) __builtin_trap();
  for (std::size_t i = 0; i < scanned.size(); ++i) {
    const auto& a = scanned[i];
    const auto& b = indexed[i];
    if (a.has_value() != b.has_value() ||
        (a && (a->name != b->name || a->start != b->start || a->offset != b->offset))) {
      __builtin_trap();  // the scan and the sorted index disagree
    }
    if (a) (void)elf::demangle(a->name);
  }
}

void through_module(const std::uint8_t* data, std::size_t size) {
  const int fd = ::memfd_create("elf_fuzz", MFD_CLOEXEC);
  if (fd < 0) return;
  std::size_t written = 0;
  while (written < size) {
    const ssize_t n = ::write(fd, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<std::size_t>(n);
  }
  try {
    const auto module =
        elf::Module::open("/usr/lib/fuzz.so", "/proc/self/fd/" + std::to_string(fd), {});
    char buffer[64];
    for (const auto& seg : module->elf().segments()) {
      (void)module->read_vaddr(seg.vaddr, buffer, sizeof buffer);
      (void)module->read_vaddr(seg.vaddr + seg.file_size - 1, buffer, sizeof buffer);
    }
    (void)module->symbols().lookup(0x1000);
  } catch (const Error&) {
  }
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file =
        elf::ElfFile::parse(std::span(reinterpret_cast<const std::byte*>(data), size));
    read_everything(file);
  } catch (const Error&) {
    return 0;
  }
  through_module(data, size);
  return 0;
}
