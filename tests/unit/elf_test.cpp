#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "hangscope/common/error.h"
#include "hangscope/elf/eh_frame_hdr.h"
#include "hangscope/elf/elf_file.h"
#include "hangscope/elf/mapped_file.h"
#include "hangscope/elf/symbol_table.h"

extern "C" __attribute__((noinline, used)) int hangscope_elf_test_marker(int x) {
  return x * 3 + 1;
}

namespace hangscope::elf {
namespace {

std::unique_ptr<MappedFile> own_executable() {
  return MappedFile::open("/proc/self/exe");
}

TEST(ElfFile, ReadsTheHeadersOfARealExecutable) {
  const auto file = own_executable();
  const auto elf = ElfFile::parse(file->bytes());
  EXPECT_EQ(elf.machine(), EM_X86_64);
  EXPECT_NE(elf.section(".text"), nullptr);
  EXPECT_NE(elf.section(".eh_frame_hdr"), nullptr);
  EXPECT_NE(elf.first_segment(PT_LOAD), nullptr);
  EXPECT_EQ(elf.build_id().size(), 40u);  // SHA-1 build id, as Debian's toolchain writes
  const auto symbol = elf.find_symbol("hangscope_elf_test_marker");
  ASSERT_TRUE(symbol);
  EXPECT_EQ(symbol->type, STT_FUNC);
  // vaddr <-> file offset round trip inside .text
  const auto offset = elf.file_offset_of(symbol->value);
  ASSERT_TRUE(offset);
  EXPECT_EQ(elf.vaddr_of_file_offset(*offset), symbol->value);
}

TEST(SymbolTable, FindsTheFunctionContainingAnAddress) {
  const auto file = own_executable();
  const auto elf = ElfFile::parse(file->bytes());
  const SymbolTable table(elf);
  const auto symbol = elf.find_symbol("hangscope_elf_test_marker");
  ASSERT_TRUE(symbol);
  const auto match = table.lookup(symbol->value + 2);
  ASSERT_TRUE(match);
  EXPECT_EQ(match->name, "hangscope_elf_test_marker");
  EXPECT_EQ(match->offset, 2u);
  EXPECT_EQ(match->start, symbol->value);
  EXPECT_FALSE(table.lookup(0));
}

// The one-pass scan (a one-off dump) and the sorted index (a long-lived agent) must name the
// same function for every address: starts, insides, ends, gaps and aliases of real libraries.
TEST(SymbolTable, ScanAndIndexAgreeOnRealLibraries) {
  for (const char* path : {"/proc/self/exe", "/lib/x86_64-linux-gnu/libc.so.6",
                           "/lib/x86_64-linux-gnu/libstdc++.so.6"}) {
    SCOPED_TRACE(path);
    const auto file = MappedFile::open(path);
    const auto elf = ElfFile::parse(file->bytes());
    std::vector<std::uint64_t> addresses;
    std::mt19937_64 random(7);
    for (const auto& sym : elf.symbols(SymbolTable::main_table_of(elf))) {
      if (sym.type != STT_FUNC || sym.value == 0) continue;
      for (const std::uint64_t at : {sym.value - 1, sym.value, sym.value + sym.size / 2,
                                     sym.value + sym.size, sym.value + random() % 64}) {
        addresses.push_back(at);
      }
      if (addresses.size() > 20000) break;
    }
    ASSERT_GT(addresses.size(), 1000u);
    const SymbolTable scanned(elf);
    const SymbolTable indexed(elf);
    const std::uint64_t probe = addresses.front();
    for (int i = 0; i <= SymbolTable::kScansBeforeIndex; ++i) (void)indexed.lookup(probe);
    ASSERT_TRUE(indexed.indexed());
    const auto by_scan = scanned.lookup_many(addresses);
    ASSERT_FALSE(scanned.indexed());
    const auto by_index = indexed.lookup_many(addresses);
    std::size_t named = 0;
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      ASSERT_EQ(by_scan[i].has_value(), by_index[i].has_value()) << std::hex << addresses[i];
      if (!by_scan[i]) continue;
      ++named;
      EXPECT_EQ(by_scan[i]->name, by_index[i]->name) << std::hex << addresses[i];
      EXPECT_EQ(by_scan[i]->start, by_index[i]->start);
      EXPECT_EQ(by_scan[i]->offset, by_index[i]->offset);
    }
    EXPECT_GT(named, addresses.size() / 2);
  }
}

TEST(SymbolTable, Demangles) {
  EXPECT_EQ(demangle("_ZN4gloo7barrierERNS_14BarrierOptionsE"),
            "gloo::barrier(gloo::BarrierOptions&)");
  EXPECT_EQ(demangle("poll"), "poll");
  EXPECT_EQ(demangle("_Znot_really"), "_Znot_really");
}

TEST(EhFrameHdr, ParsesTheIndexOfARealExecutable) {
  const auto file = own_executable();
  const auto elf = ElfFile::parse(file->bytes());
  const Segment* segment = elf.first_segment(PT_GNU_EH_FRAME);
  ASSERT_NE(segment, nullptr);
  const auto hdr = parse_eh_frame_hdr(elf.segment_data(*segment), segment->vaddr);
  ASSERT_TRUE(hdr);
  EXPECT_GT(hdr->fde_count, 100u);
  EXPECT_EQ(hdr->table_encoding, kEhPeDatarelSdata4);
  EXPECT_EQ(hdr->eh_frame_vaddr, elf.section(".eh_frame")->address);
  EXPECT_EQ(hdr->table_vaddr, segment->vaddr + 12);
}

TEST(EhFrameHdr, RejectsMalformedHeaders) {
  std::vector<std::byte> data(12, std::byte{0});
  EXPECT_FALSE(parse_eh_frame_hdr({}, 0));
  EXPECT_FALSE(parse_eh_frame_hdr(data, 0));  // version 0
  data[0] = std::byte{1};
  data[1] = std::byte{0x1b};  // pcrel sdata4
  data[2] = std::byte{0x03};  // udata4
  data[3] = std::byte{0x3b};
  data[8] = std::byte{0xff};  // claims 255 FDEs in 0 bytes of table
  EXPECT_FALSE(parse_eh_frame_hdr(data, 0x1000));
  data[2] = std::byte{0x07};  // unknown format
  EXPECT_FALSE(parse_eh_frame_hdr(data, 0x1000));
}

std::string parse_error(const std::vector<std::byte>& bytes) {
  try {
    ElfFile::parse(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ElfFile, RejectsBrokenFilesWithTheReason) {
  EXPECT_EQ(parse_error({}), "not an ELF file (bad magic)");
  std::vector<std::byte> header(sizeof(Elf64_Ehdr), std::byte{0});
  std::memcpy(header.data(), ELFMAG, SELFMAG);
  header[EI_CLASS] = std::byte{ELFCLASS32};
  EXPECT_EQ(parse_error(header), "unsupported ELF class (only ELF64)");
  header[EI_CLASS] = std::byte{ELFCLASS64};
  header[EI_DATA] = std::byte{ELFDATA2MSB};
  EXPECT_EQ(parse_error(header), "unsupported ELF byte order (only little-endian)");
  header[EI_DATA] = std::byte{ELFDATA2LSB};
  Elf64_Ehdr ehdr;
  std::memcpy(&ehdr, header.data(), sizeof ehdr);
  ehdr.e_phnum = 4;
  ehdr.e_phentsize = sizeof(Elf64_Phdr);
  ehdr.e_phoff = 1u << 20;
  std::memcpy(header.data(), &ehdr, sizeof ehdr);
  EXPECT_EQ(parse_error(header), "program header table lies outside the file");
}

// Random corruption of a real file: parsing and every accessor must stay in bounds.
TEST(ElfFile, SurvivesRandomCorruption) {
  const auto file = own_executable();
  const auto original = file->bytes();
  std::vector<std::byte> bytes(original.begin(),
                               original.begin() + std::min<std::size_t>(original.size(), 1 << 16));
  std::mt19937 random(1234);
  int parsed = 0;
  for (int round = 0; round < 2000; ++round) {
    auto copy = bytes;
    for (int flips = 0; flips < 8; ++flips) {
      const std::size_t at = random() % std::min<std::size_t>(copy.size(), 4096);
      copy[at] = static_cast<std::byte>(random());
    }
    copy.resize(random() % copy.size());
    try {
      const auto elf = ElfFile::parse(copy);
      ++parsed;
      for (const auto& s : elf.sections()) (void)elf.section_data(s);
      (void)elf.build_id();
      (void)elf.debuglink();
      (void)SymbolTable(elf).lookup(0x1234);
      if (const auto* seg = elf.first_segment(PT_GNU_EH_FRAME)) {
        (void)parse_eh_frame_hdr(elf.segment_data(*seg), seg->vaddr);
      }
    } catch (const Error&) {
    }
  }
  EXPECT_GT(parsed, 0);
}

TEST(MappedFile, NamesThePathWhenItCannotOpen) {
  try {
    MappedFile::open("/nonexistent/libfoo.so");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot open /nonexistent/libfoo.so: No such file or directory");
  }
  EXPECT_THROW(MappedFile::open("/proc/self"), Error);
}

}  // namespace
}  // namespace hangscope::elf
