// One ELF file loaded in a target: its image, symbols and unwind index, opened from the target's
// view.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "hangscope/elf/eh_frame_hdr.h"
#include "hangscope/elf/elf_file.h"
#include "hangscope/elf/mapped_file.h"
#include "hangscope/elf/symbol_table.h"

namespace hangscope::elf {

class Module {
 public:
  // Maps the file at open_path (what the target sees as `path`) and parses it; throws Error.
  // debug_roots: directories holding /usr/lib/debug trees to search for a separate debug file.
  // `links`: kRefuse when open_path comes from the target or a core (MappedFile::open).
  static std::unique_ptr<Module> open(const std::string& path, const std::string& open_path,
                                      const std::vector<std::string>& debug_roots,
                                      Links links = Links::kFollow);

  const std::string& path() const { return path_; }
  const ElfFile& elf() const { return elf_; }
  const std::string& build_id() const { return build_id_; }
  // Path of the separate debug file whose symbols were added ("" when none was found).
  const std::string& debug_file() const { return debug_file_; }
  const SymbolTable& symbols() const { return symbols_; }
  const std::optional<EhFrameHdr>& eh_frame_hdr() const { return eh_frame_hdr_; }

  // Copies file-backed bytes at a virtual address of this module; returns the count copied.
  std::size_t read_vaddr(std::uint64_t vaddr, void* out, std::size_t size) const;

 private:
  Module(std::string path, std::unique_ptr<MappedFile> file, ElfFile elf)
      : path_(std::move(path)), file_(std::move(file)), elf_(std::move(elf)) {}
  void load_debug_symbols(const std::vector<std::string>& debug_roots);

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  ElfFile elf_;
  std::string build_id_;
  std::unique_ptr<MappedFile> debug_mapped_;
  std::optional<ElfFile> debug_elf_;
  std::string debug_file_;
  SymbolTable symbols_;
  std::optional<EhFrameHdr> eh_frame_hdr_;
};

}  // namespace hangscope::elf
