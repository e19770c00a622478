// The ELF core reader on cores built byte by byte: threads and signals (NT_PRSTATUS), the process
// (NT_PRPSINFO), mappings from PT_LOAD and NT_FILE (gcore leaves code out), the auxiliary vector,
// reads of dumped and left-out memory, cores that are cut short or malformed, and files named by a
// core that are no regular files.
#include "hangscope/elf/core_file.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <sys/procfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "hangscope/capture/core_capture.h"
#include "hangscope/common/error.h"
#include "target_process.h"

namespace hangscope::elf {
namespace {

constexpr std::uint64_t kData = 0x10000, kLibc = 0x20000, kExe = 0x30000, kPage = 0x1000;

class CoreBuilder {
 public:
  void thread(pid_t tid, int signal, std::uint64_t rip) {
    elf_prstatus status{};
    status.pr_pid = tid;
    status.pr_cursig = static_cast<short>(signal);
    user_regs_struct regs{};
    regs.rip = rip;
    regs.rsp = kData + 0x800;
    std::memcpy(&status.pr_reg, &regs, sizeof regs);
    note("CORE", NT_PRSTATUS, &status, sizeof status);
  }
  void process(pid_t pid, const char* command, const char* arguments) {
    elf_prpsinfo info{};
    info.pr_pid = pid;
    info.pr_ppid = 1;
    info.pr_sname = 'R';
    std::strncpy(info.pr_fname, command, sizeof info.pr_fname);
    std::strncpy(info.pr_psargs, arguments, sizeof info.pr_psargs);
    note("CORE", NT_PRPSINFO, &info, sizeof info);
  }
  void auxv(std::vector<std::uint64_t> pairs) {
    pairs.insert(pairs.end(), {AT_NULL, 0});
    note("CORE", NT_AUXV, pairs.data(), pairs.size() * 8);
  }
  // (start, end, offset in pages, path) entries.
  void files(const std::vector<
                 std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::string>>& entries,
             std::uint64_t count_override = 0) {
    std::vector<std::uint64_t> words = {count_override ? count_override : entries.size(), kPage};
    std::string names;
    for (const auto& [start, end, page, path] : entries) {
      words.insert(words.end(), {start, end, page});
      names += path + '\0';
    }
    std::string desc(reinterpret_cast<const char*>(words.data()), words.size() * 8);
    note("CORE", NT_FILE, (desc + names).data(), desc.size() + names.size());
  }
  void load(std::uint64_t vaddr, std::vector<std::byte> bytes, std::uint64_t memory_size,
            std::uint32_t flags) {
    loads_.push_back({vaddr, std::move(bytes), memory_size, flags});
  }

  std::string bytes() const {
    const std::size_t phnum = 1 + loads_.size();
    std::uint64_t offset = sizeof(Elf64_Ehdr) + phnum * sizeof(Elf64_Phdr);
    Elf64_Ehdr header{};
    std::memcpy(header.e_ident, ELFMAG, SELFMAG);
    header.e_ident[EI_CLASS] = ELFCLASS64;
    header.e_ident[EI_DATA] = ELFDATA2LSB;
    header.e_ident[EI_VERSION] = EV_CURRENT;
    header.e_type = ET_CORE;
    header.e_machine = EM_X86_64;
    header.e_version = EV_CURRENT;
    header.e_phoff = sizeof(Elf64_Ehdr);
    header.e_ehsize = sizeof(Elf64_Ehdr);
    header.e_phentsize = sizeof(Elf64_Phdr);
    header.e_phnum = static_cast<Elf64_Half>(phnum);
    std::string out(reinterpret_cast<const char*>(&header), sizeof header);
    std::string body;
    Elf64_Phdr notes{};
    notes.p_type = PT_NOTE;
    notes.p_offset = offset;
    notes.p_filesz = notes_.size();
    out.append(reinterpret_cast<const char*>(&notes), sizeof notes);
    body += notes_;
    for (const auto& l : loads_) {
      Elf64_Phdr ph{};
      ph.p_type = PT_LOAD;
      ph.p_flags = l.flags;
      ph.p_offset = offset + body.size();
      ph.p_vaddr = l.vaddr;
      ph.p_filesz = l.bytes.size();
      ph.p_memsz = l.memory_size;
      out.append(reinterpret_cast<const char*>(&ph), sizeof ph);
      body.append(reinterpret_cast<const char*>(l.bytes.data()), l.bytes.size());
    }
    return out + body;
  }

 private:
  void note(const char* name, std::uint32_t type, const void* desc, std::size_t size) {
    Elf64_Nhdr header{static_cast<Elf64_Word>(std::strlen(name) + 1), static_cast<Elf64_Word>(size),
                      type};
    notes_.append(reinterpret_cast<const char*>(&header), sizeof header);
    std::string padded_name(name, std::strlen(name) + 1);
    padded_name.resize((padded_name.size() + 3) & ~std::size_t{3}, '\0');
    notes_ += padded_name;
    std::string padded(static_cast<const char*>(desc), size);
    padded.resize((size + 3) & ~std::size_t{3}, '\0');
    notes_ += padded;
  }
  struct Load {
    std::uint64_t vaddr;
    std::vector<std::byte> bytes;
    std::uint64_t memory_size;
    std::uint32_t flags;
  };
  std::string notes_;
  std::vector<Load> loads_;
};

std::vector<std::byte> pattern(std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(i * 7);
  return bytes;
}

// A process of two threads (both took SIGABRT): a dumped data page, libc's page left out by the
// filter (PT_LOAD without bytes), the executable left out entirely (NT_FILE only, as gcore does).
CoreBuilder typical_core() {
  CoreBuilder core;
  core.process(4711, "python3", "VLLM::Worker_TP1");
  core.thread(4711, SIGABRT, kExe + 0x10);
  core.thread(4712, SIGABRT, kLibc + 0x20);
  core.auxv({AT_PHDR, kExe + 0x40, AT_PAGESZ, kPage});
  core.files({{kLibc, kLibc + kPage, 1, "/usr/lib/x86_64-linux-gnu/libc.so.6"},
              {kExe, kExe + kPage, 0, "/usr/bin/python3.11 (deleted)"}});
  core.load(kData, pattern(kPage), kPage, PF_R | PF_W);
  core.load(kLibc, {}, kPage, PF_R | PF_X);
  return core;
}

std::string write_core(const std::string& bytes) {
  char path[] = "/tmp/hangscope-core-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  return path;
}

struct TempCore {
  std::string path;
  explicit TempCore(const std::string& bytes) : path(write_core(bytes)) {}
  ~TempCore() { ::unlink(path.c_str()); }
};

TEST(CoreFile, ThreadsProcessMappingsAndAuxv) {
  TempCore file(typical_core().bytes());
  const auto core = CoreFile::open(file.path);
  ASSERT_EQ(core->threads().size(), 2u);
  EXPECT_EQ(core->threads()[0].tid, 4711);
  EXPECT_EQ(core->threads()[1].signal, SIGABRT);
  user_regs_struct regs{};
  std::memcpy(&regs, core->threads()[1].registers.data(), sizeof regs);
  EXPECT_EQ(regs.rip, kLibc + 0x20);
  EXPECT_EQ(core->process().pid, 4711);
  EXPECT_EQ(core->process().command, "python3");
  EXPECT_EQ(core->process().arguments, "VLLM::Worker_TP1");
  EXPECT_EQ(core->auxv(AT_PHDR), kExe + 0x40);
  EXPECT_FALSE(core->auxv(AT_EXECFN).has_value());
  EXPECT_FALSE(core->written_by_gdb());

  const auto* libc = core->maps().find(kLibc + 5);
  ASSERT_NE(libc, nullptr);
  EXPECT_EQ(libc->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(libc->offset, kPage);
  EXPECT_TRUE(libc->executable);
  EXPECT_TRUE(libc->is_file());
  // The executable has no PT_LOAD at all: a read-only mapping of its own, named by NT_FILE.
  const auto* exe = core->maps().find(kExe);
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(exe->path, "/usr/bin/python3.11");
  EXPECT_TRUE(exe->deleted);
  EXPECT_TRUE(exe->readable);
  EXPECT_FALSE(exe->writable);
  EXPECT_EQ(core->executable_path(), "/usr/bin/python3.11");
  const auto* data = core->maps().find(kData);
  ASSERT_NE(data, nullptr);
  EXPECT_TRUE(data->path.empty());
  EXPECT_TRUE(data->writable);
}

TEST(CoreFile, ReadsDumpedBytesOnlyAndStopsAtTheFirstMissingByte) {
  TempCore file(typical_core().bytes());
  auto core = CoreFile::open(file.path);
  const auto expected = pattern(kPage);
  std::vector<std::byte> got(16);
  ASSERT_EQ(core->read(kData + 100, got.data(), got.size()), 16u);
  EXPECT_EQ(std::memcmp(got.data(), expected.data() + 100, 16), 0);
  // Up to the end of the dumped page: a prefix.
  EXPECT_EQ(core->read(kData + kPage - 4, got.data(), got.size()), 4u);
  // libc's page was left out: nothing, not zeros.
  EXPECT_EQ(core->read(kLibc, got.data(), got.size()), 0u);
  EXPECT_EQ(core->read(kExe, got.data(), got.size()), 0u);
  EXPECT_EQ(core->read(0, got.data(), got.size()), 0u);
}

TEST(CoreFile, ACoreCutShortKeepsWhatItHoldsAndSaysSo) {
  const std::string whole = typical_core().bytes();
  TempCore file(whole.substr(0, whole.size() - kPage / 2));  // half the data page is gone
  auto core = CoreFile::open(file.path);
  std::vector<std::byte> got(kPage);
  EXPECT_EQ(core->read(kData, got.data(), got.size()), kPage / 2);
  ASSERT_FALSE(core->notes().empty());
  EXPECT_NE(core->notes().front().find("truncated"), std::string::npos);
}

TEST(CoreFile, FilesThatAreNoUsableCoreAreRefusedWithTheReason) {
  const auto refused = [](const std::string& bytes) -> std::string {
    TempCore file(bytes);
    try {
      CoreFile::open(file.path);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(file.path), std::string::npos) << e.what();
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_NE(refused("not an ELF file at all").find("not an ELF file"), std::string::npos);
  CoreBuilder no_threads;
  no_threads.process(1, "x", "x");
  EXPECT_NE(refused(no_threads.bytes()).find("without threads"), std::string::npos);
  std::string executable = typical_core().bytes();
  executable[offsetof(Elf64_Ehdr, e_type)] = ET_EXEC;
  EXPECT_NE(refused(executable).find("not a core"), std::string::npos);
  std::string arm = typical_core().bytes();
  const Elf64_Half aarch64 = EM_AARCH64;
  std::memcpy(arm.data() + offsetof(Elf64_Ehdr, e_machine), &aarch64, sizeof aarch64);
  EXPECT_NE(refused(arm).find("another architecture"), std::string::npos);
}

TEST(CoreFile, AMalformedFileNoteLosesTheFilesNotTheThreads) {
  CoreBuilder core;
  core.thread(7, 0, 0);
  core.files({{kLibc, kLibc + kPage, 0, "/lib/libc.so.6"}},
             /*count_override=*/std::uint64_t{1} << 40);
  TempCore file(core.bytes());
  auto parsed = CoreFile::open(file.path);
  EXPECT_EQ(parsed->threads().size(), 1u);
  EXPECT_EQ(parsed->maps().find(kLibc), nullptr);
  ASSERT_FALSE(parsed->notes().empty());
  EXPECT_NE(parsed->notes().front().find("NT_FILE"), std::string::npos);
}

// Issue 30 item 6: the files a core names (NT_FILE) are opened as root on the reader's machine.
// A FIFO there blocked the read forever, /dev/zero was opened; now each is named with the reason
// and never opened, a path climbing out with ".." is not tried, and the dump still comes out.
TEST(CoreFile, FilesTheCoreNamesThatAreNoRegularFilesAreNamedAndNeverOpened) {
  const std::string fifo = testing::temp_path("core-names-fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  constexpr std::uint64_t kOther = 0x40000;
  CoreBuilder core;
  core.process(4711, "python3", "python3 train.py");
  core.thread(4711, SIGABRT, kLibc + 0x20);  // a thread in each file: each file is looked for
  core.thread(4712, SIGABRT, kExe + 0x20);
  core.thread(4713, SIGABRT, kOther + 0x20);
  core.files({{kLibc, kLibc + kPage, 0, fifo},
              {kExe, kExe + kPage, 0, "/dev/zero"},
              {kOther, kOther + kPage, 0, "/usr/lib/../../etc/shadow"}});
  core.load(kData, pattern(kPage), kPage, PF_R | PF_W);
  core.load(kLibc, {}, kPage, PF_R | PF_X);
  core.load(kExe, {}, kPage, PF_R | PF_X);
  core.load(kOther, {}, kPage, PF_R | PF_X);
  TempCore file(core.bytes());
  for (const std::string sysroot : {"", "/"}) {
    capture::CoreOptions options;
    options.sysroot = sysroot;
    options.stacks = capture::StackKinds::kNativeOnly;
    const auto started = std::chrono::steady_clock::now();
    const auto dump = capture::capture_core(file.path, options);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
    ASSERT_EQ(dump.threads.size(), 3u);
    std::string notes;
    for (const auto& n : dump.notes) notes += n + "\n";
    EXPECT_NE(notes.find("cannot open " + fifo + ": is a FIFO, not a regular file"),
              std::string::npos)
        << notes;
    EXPECT_NE(notes.find("cannot open /dev/zero: is a character device, not a regular file"),
              std::string::npos)
        << notes;
    EXPECT_NE(notes.find("holds '.' or '..': not opened"), std::string::npos) << notes;
  }
  ::unlink(fifo.c_str());
}

}  // namespace
}  // namespace hangscope::elf
