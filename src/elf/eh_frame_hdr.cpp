#include "hangscope/elf/eh_frame_hdr.h"

#include <cstring>

namespace hangscope::elf {
namespace {

constexpr std::uint8_t kOmit = 0xff;
constexpr std::uint8_t kFormatMask = 0x0f;
constexpr std::uint8_t kApplicationMask = 0x70;
constexpr std::uint8_t kAbsptr = 0x00, kUdata4 = 0x03, kSdata4 = 0x0b, kUdata8 = 0x04,
                       kSdata8 = 0x0c;
constexpr std::uint8_t kPcrel = 0x10, kDatarel = 0x30;

// Decodes one encoded pointer at data[pos]; advances pos.
std::optional<std::uint64_t> read_encoded(std::span<const std::byte> data, std::size_t& pos,
                                          std::uint8_t encoding, std::uint64_t section_vaddr) {
  if (encoding == kOmit) return std::nullopt;
  std::uint64_t value = 0;
  std::size_t width = 0;
  switch (encoding & kFormatMask) {
    case kAbsptr:
    case kUdata8:
    case kSdata8:
      width = 8;
      break;
    case kUdata4:
    case kSdata4:
      width = 4;
      break;
    default:
      return std::nullopt;
  }
  if (pos + width > data.size()) return std::nullopt;
  const std::uint64_t field_vaddr = section_vaddr + pos;
  if (width == 4) {
    std::uint32_t raw;
    std::memcpy(&raw, data.data() + pos, 4);
    value =
        (encoding & kFormatMask) == kSdata4
            ? static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int32_t>(raw)))
            : raw;
  } else {
    std::memcpy(&value, data.data() + pos, 8);
  }
  pos += width;
  switch (encoding & kApplicationMask) {
    case 0:
      return value;
    case kPcrel:
      return field_vaddr + value;
    case kDatarel:
      return section_vaddr + value;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<EhFrameHdr> parse_eh_frame_hdr(std::span<const std::byte> data, std::uint64_t vaddr) {
  if (data.size() < 4 || static_cast<std::uint8_t>(data[0]) != 1) return std::nullopt;
  const auto eh_frame_enc = static_cast<std::uint8_t>(data[1]);
  const auto count_enc = static_cast<std::uint8_t>(data[2]);
  const auto table_enc = static_cast<std::uint8_t>(data[3]);
  std::size_t pos = 4;
  const auto eh_frame = read_encoded(data, pos, eh_frame_enc, vaddr);
  const auto count = read_encoded(data, pos, count_enc, vaddr);
  if (!eh_frame || !count) return std::nullopt;
  EhFrameHdr hdr;
  hdr.eh_frame_vaddr = *eh_frame;
  hdr.fde_count = *count;
  hdr.table_encoding = table_enc;
  hdr.table_vaddr = vaddr + pos;
  // Each table entry is two values of the table encoding; check that they fit.
  const std::size_t entry =
      (table_enc & kFormatMask) == kSdata4 || (table_enc & kFormatMask) == kUdata4 ? 8 : 16;
  if (hdr.fde_count > (data.size() - pos) / entry) return std::nullopt;
  return hdr;
}

}  // namespace hangscope::elf
