#include "hangscope/elf/core_file.h"

#include <elf.h>
#include <sys/procfs.h>

#include <algorithm>
#include <cstring>

#include "hangscope/common/error.h"

namespace hangscope::elf {
namespace {

static_assert(sizeof(elf_gregset_t) == sizeof(CoreThread::registers),
              "NT_PRSTATUS registers: x86-64's user_regs_struct");

template <typename T>
std::optional<T> copy_out(std::span<const std::byte> bytes) {
  if (bytes.size() < sizeof(T)) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

std::string bounded_string(const char* text, std::size_t max) {
  return std::string(text, strnlen(text, max));
}

std::uint64_t microseconds(const struct timeval& t) {
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000 + static_cast<std::uint64_t>(t.tv_usec);
}

std::uint64_t align4(std::uint64_t n) {
  return (n + 3) & ~std::uint64_t{3};
}

// A stable stand-in for the inode a core does not record: the same path gives the same key in
// every core, so a module cache shares the file's parse between them.
std::uint64_t path_inode(const std::string& path) {
  std::uint64_t hash = 1469598103934665603ull;
  for (const unsigned char c : path) hash = (hash ^ c) * 1099511628211ull;
  return hash | 1;  // never 0, which means "no file"
}

}  // namespace

std::unique_ptr<CoreFile> CoreFile::open(const std::string& path) {
  // The user's path (links followed); a FIFO or device is refused, never opened.
  std::unique_ptr<CoreFile> core(new CoreFile(path, MappedFile::open(path, {}, "core file")));
  core->parse();
  return core;
}

CoreFile::CoreFile(std::string path, std::unique_ptr<MappedFile> file)
    : path_(std::move(path)), file_(std::move(file)) {}

void CoreFile::parse() {
  const auto bytes = file_->bytes();
  ElfFile elf = [&] {
    try {
      return ElfFile::parse(bytes);
    } catch (const Error& e) {
      throw Error(path_ + ": " + e.what());
    }
  }();
  if (elf.type() != ET_CORE)
    throw Error(path_ + ": an ELF file but not a core (e_type is not ET_CORE)");
  if (elf.machine() != EM_X86_64)
    throw Error(path_ + ": a core of another architecture (only x86-64)");
  written_by_gdb_ = !elf.sections().empty();
  bool any_note = false;
  for (const auto& segment : elf.segments()) {
    if (segment.type == PT_NOTE) {
      any_note = true;
      const auto data = elf.segment_data(segment);
      if (data.size() < segment.file_size) notes_.push_back("the note segment is cut short");
      parse_notes(data);
    } else if (segment.type == PT_LOAD && segment.memory_size > 0) {
      CoreSegment s{segment.vaddr, segment.vaddr + segment.memory_size, segment.offset, 0,
                    segment.flags};
      // A core cut short (disk full, size limit) holds a prefix of what its headers promise.
      if (segment.offset < bytes.size()) {
        s.dumped = std::min<std::uint64_t>(segment.file_size, bytes.size() - segment.offset);
      }
      if (s.dumped < segment.file_size) {
        notes_.push_back("the core is truncated: mapping " + std::to_string(s.start) +
                         " lacks bytes its header promises");
      }
      segments_.push_back(s);
    }
  }
  if (!any_note) throw Error(path_ + ": a core without notes (no PT_NOTE): no threads to read");
  if (threads_.empty()) throw Error(path_ + ": a core without threads (no NT_PRSTATUS note)");
  std::sort(segments_.begin(), segments_.end(),
            [](const CoreSegment& a, const CoreSegment& b) { return a.start < b.start; });
  std::vector<proc::Mapping> files = std::move(file_mappings_);
  build_maps(files);
}

void CoreFile::parse_notes(std::span<const std::byte> notes) {
  std::uint64_t at = 0;
  while (at + sizeof(Elf64_Nhdr) <= notes.size()) {
    const auto header = *copy_out<Elf64_Nhdr>(notes.subspan(at));
    const std::uint64_t name_at = at + sizeof(Elf64_Nhdr);
    const std::uint64_t desc_at = name_at + align4(header.n_namesz);
    const std::uint64_t next = desc_at + align4(header.n_descsz);
    if (desc_at > notes.size() || header.n_descsz > notes.size() - desc_at) {
      notes_.push_back("a note runs past the end of its segment: the notes after it are lost");
      return;
    }
    const auto name = std::string_view(
        reinterpret_cast<const char*>(notes.data() + name_at),
        strnlen(reinterpret_cast<const char*>(notes.data() + name_at), header.n_namesz));
    const auto desc = notes.subspan(desc_at, header.n_descsz);
    if (name == "CORE") {
      if (header.n_type == NT_PRSTATUS) {
        if (const auto status = copy_out<elf_prstatus>(desc)) {
          CoreThread thread;
          thread.tid = status->pr_pid;
          thread.signal = status->pr_cursig;
          thread.user_us = microseconds(status->pr_utime);
          thread.system_us = microseconds(status->pr_stime);
          std::memcpy(thread.registers.data(), &status->pr_reg, sizeof thread.registers);
          threads_.push_back(thread);
        } else {
          notes_.push_back("a thread's NT_PRSTATUS note is too short: that thread is left out");
        }
      } else if (header.n_type == NT_PRPSINFO) {
        if (const auto info = copy_out<elf_prpsinfo>(desc)) {
          process_.pid = info->pr_pid;
          process_.ppid = info->pr_ppid;
          process_.state = info->pr_sname != 0 ? info->pr_sname : '?';
          process_.command = bounded_string(info->pr_fname, sizeof info->pr_fname);
          process_.arguments = bounded_string(info->pr_psargs, sizeof info->pr_psargs);
          while (!process_.arguments.empty() && process_.arguments.back() == ' ') {
            process_.arguments.pop_back();
          }
        }
      } else if (header.n_type == NT_AUXV) {
        for (std::uint64_t i = 0; i + 16 <= desc.size(); i += 16) {
          const auto type = *copy_out<std::uint64_t>(desc.subspan(i));
          const auto value = *copy_out<std::uint64_t>(desc.subspan(i + 8));
          if (type == AT_NULL) break;
          auxv_.emplace_back(type, value);
        }
      } else if (header.n_type == NT_FILE) {
        parse_file_note(desc);
      }
    }
    at = next;
  }
}

// NT_FILE: count, page size, count x (start, end, offset in pages), then count file names.
void CoreFile::parse_file_note(std::span<const std::byte> desc) {
  const auto count = copy_out<std::uint64_t>(desc);
  const auto page =
      copy_out<std::uint64_t>(desc.size() >= 8 ? desc.subspan(8) : desc.subspan(0, 0));
  if (!count || !page || *count > desc.size() / 24) {
    notes_.push_back("the NT_FILE note is malformed: mapped files are unknown");
    return;
  }
  const std::uint64_t names_at = 16 + *count * 24;
  if (names_at > desc.size()) {
    notes_.push_back("the NT_FILE note is malformed: mapped files are unknown");
    return;
  }
  const auto names = desc.subspan(names_at);
  std::uint64_t name_at = 0;
  for (std::uint64_t i = 0; i < *count; ++i) {
    const auto entry = desc.subspan(16 + i * 24);
    proc::Mapping mapping;
    mapping.start = *copy_out<std::uint64_t>(entry);
    mapping.end = *copy_out<std::uint64_t>(entry.subspan(8));
    mapping.offset = *copy_out<std::uint64_t>(entry.subspan(16)) * *page;
    if (name_at >= names.size()) break;
    const char* name = reinterpret_cast<const char*>(names.data() + name_at);
    const std::size_t length = strnlen(name, names.size() - name_at);
    mapping.path.assign(name, length);
    name_at += length + 1;
    constexpr std::string_view kDeleted = " (deleted)";
    if (mapping.path.ends_with(kDeleted)) {
      mapping.path.resize(mapping.path.size() - kDeleted.size());
      mapping.deleted = true;
    }
    mapping.device = "core";
    mapping.inode = path_inode(mapping.path);
    file_mappings_.push_back(std::move(mapping));
  }
}

// Every PT_LOAD is a mapping, and the NT_FILE entry over it names its file. gcore writes no
// PT_LOAD for the file mappings it leaves out (code, read-only data): the parts of NT_FILE
// entries no PT_LOAD covers are mappings too, read-only, their code read from the file.
void CoreFile::build_maps(const std::vector<proc::Mapping>& files) {
  std::vector<proc::Mapping> mappings;
  const auto file_at = [&](std::uint64_t address) -> const proc::Mapping* {
    for (const auto& file : files) {
      if (file.contains(address)) return &file;
    }
    return nullptr;
  };
  const auto add = [&](std::uint64_t start, std::uint64_t end, const proc::Mapping* file) {
    proc::Mapping m;
    m.start = start;
    m.end = end;
    if (file != nullptr) {
      m.path = file->path;
      m.device = file->device;
      m.inode = file->inode;
      m.deleted = file->deleted;
      m.offset = file->offset + (start - file->start);
    }
    return m;
  };
  for (const auto& segment : segments_) {
    proc::Mapping m = add(segment.start, segment.end, file_at(segment.start));
    m.readable = (segment.flags & PF_R) != 0;
    m.writable = (segment.flags & PF_W) != 0;
    m.executable = (segment.flags & PF_X) != 0;
    mappings.push_back(std::move(m));
  }
  for (const auto& file : files) {
    std::uint64_t at = file.start;
    for (const auto& segment : segments_) {  // ascending
      if (segment.end <= at || segment.start >= file.end) continue;
      if (segment.start > at) mappings.push_back(add(at, segment.start, &file));
      at = std::max(at, segment.end);
    }
    if (at < file.end) mappings.push_back(add(at, file.end, &file));
  }
  for (auto& m : mappings) {
    if (m.device == "core" && !m.readable && !m.writable && !m.executable) {
      m.readable = true;  // left out by gcore: read-only, perhaps code
      m.executable = true;
    }
  }
  maps_ = proc::MemoryMap(std::move(mappings));
}

std::optional<std::uint64_t> CoreFile::auxv(std::uint64_t type) const {
  for (const auto& [t, value] : auxv_) {
    if (t == type) return value;
  }
  return std::nullopt;
}

std::string CoreFile::executable_path() const {
  if (const auto phdr = auxv(AT_PHDR)) {
    if (const auto* mapping = maps_.find(*phdr); mapping != nullptr && mapping->is_file()) {
      return mapping->path;
    }
  }
  for (const auto& mapping : maps_.mappings()) {
    if (mapping.is_file()) return mapping.path;
  }
  return {};
}

std::size_t CoreFile::read(std::uint64_t address, void* out, std::size_t size) {
  const auto bytes = file_->bytes();
  std::size_t copied = 0;
  while (copied < size) {
    const std::uint64_t at = address + copied;
    auto it = std::upper_bound(segments_.begin(), segments_.end(), at,
                               [](std::uint64_t a, const CoreSegment& s) { return a < s.start; });
    if (it == segments_.begin()) break;
    --it;
    if (at >= it->start + it->dumped) break;
    const std::uint64_t in_segment = at - it->start;
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(size - copied, it->dumped - in_segment));
    std::memcpy(static_cast<std::byte*>(out) + copied, bytes.data() + it->file_offset + in_segment,
                n);
    copied += n;
  }
  return copied;
}

}  // namespace hangscope::elf
