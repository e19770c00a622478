// Parser of .eh_frame_hdr (the binary-search index of FDEs that unwinders use).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace hangscope::elf {

struct EhFrameHdr {
  std::uint64_t eh_frame_vaddr = 0;  // start of .eh_frame
  std::uint64_t table_vaddr = 0;     // start of the (initial_location, fde) table
  std::uint64_t fde_count = 0;
  std::uint8_t table_encoding = 0;  // DW_EH_PE_* of the table entries
};

// `data` is the section's bytes and `vaddr` the virtual address they are loaded at.
// nullopt when the header is malformed or uses an encoding this parser does not know.
std::optional<EhFrameHdr> parse_eh_frame_hdr(std::span<const std::byte> data, std::uint64_t vaddr);

// DW_EH_PE_datarel | DW_EH_PE_sdata4: the only table encoding libunwind's search accepts.
inline constexpr std::uint8_t kEhPeDatarelSdata4 = 0x3b;

}  // namespace hangscope::elf
