#include "hangscope/elf/module.h"

#include <elf.h>
#include <unistd.h>

#include <cstring>

#include "hangscope/common/error.h"

namespace hangscope::elf {

std::unique_ptr<Module> Module::open(const std::string& path, const std::string& open_path,
                                     const std::vector<std::string>& debug_roots, Links links) {
  auto mapped = MappedFile::open(open_path, {links, std::nullopt});
  ElfFile parsed = [&] {
    try {
      return ElfFile::parse(mapped->bytes());
    } catch (const Error& e) {
      throw Error(path + ": " + e.what());
    }
  }();
  std::unique_ptr<Module> module(new Module(path, std::move(mapped), std::move(parsed)));
  module->build_id_ = module->elf_.build_id();
  module->symbols_.add_functions_of(module->elf_, SymbolTable::main_table_of(module->elf_));
  module->load_debug_symbols(debug_roots);
  if (const Segment* hdr = module->elf_.first_segment(PT_GNU_EH_FRAME)) {
    module->eh_frame_hdr_ = parse_eh_frame_hdr(module->elf_.segment_data(*hdr), hdr->vaddr);
  }
  return module;
}

void Module::load_debug_symbols(const std::vector<std::string>& debug_roots) {
  if (elf_.section(".symtab") != nullptr) return;  // already has the full table
  std::vector<std::string> candidates;
  for (const auto& root : debug_roots) {
    if (build_id_.size() > 2) {
      candidates.push_back(root + "/usr/lib/debug/.build-id/" + build_id_.substr(0, 2) + "/" +
                           build_id_.substr(2) + ".debug");
    }
    const std::string link = elf_.debuglink();
    if (!link.empty()) {
      const auto slash = path_.rfind('/');
      const std::string dir = slash == std::string::npos ? "" : path_.substr(0, slash);
      candidates.push_back(root + "/usr/lib/debug" + dir + "/" + link);
    }
  }
  for (const auto& candidate : candidates) {
    if (::access(candidate.c_str(), R_OK) != 0) continue;
    try {
      // Links followed (distributions link .build-id entries to the debug files); a FIFO or
      // device under a debug root is refused like any input, and the build id must match.
      auto mapped = MappedFile::open(candidate);
      auto parsed = ElfFile::parse(mapped->bytes());
      if (parsed.build_id() != build_id_ || parsed.section(".symtab") == nullptr) continue;
      debug_mapped_ = std::move(mapped);
      debug_elf_.emplace(std::move(parsed));
      symbols_.add_functions_of(*debug_elf_, ".symtab");
      debug_file_ = candidate;
      return;
    } catch (const Error&) {
      continue;  // a broken debug file is as good as none
    }
  }
}

std::size_t Module::read_vaddr(std::uint64_t vaddr, void* out, std::size_t size) const {
  const auto offset = elf_.file_offset_of(vaddr);
  if (!offset) return 0;
  const auto image = elf_.image();
  if (*offset >= image.size()) return 0;
  // Stay inside the segment's file bytes.
  std::size_t available = image.size() - *offset;
  for (const auto& seg : elf_.segments()) {
    if (seg.type == PT_LOAD && vaddr >= seg.vaddr && vaddr - seg.vaddr < seg.file_size) {
      available = std::min<std::size_t>(available, seg.file_size - (vaddr - seg.vaddr));
      break;
    }
  }
  const std::size_t n = std::min(size, available);
  std::memcpy(out, image.data() + *offset, n);
  return n;
}

}  // namespace hangscope::elf
