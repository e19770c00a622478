#include "hangscope/native/unwinder.h"

#include <elf.h>
#include <libunwind.h>

#include <cstring>

#include "arch_unwind.h"
#include "hangscope/common/error.h"
#include "hangscope/elf/eh_frame_hdr.h"

namespace hangscope::native {

struct Unwinder::Impl {
  elf::ProcessImage& image;
  memory::MemoryReader* live;
  unw_addr_space_t address_space = nullptr;
};

namespace {

// Per-walk state handed to the accessors through libunwind's `arg`.
struct WalkContext {
  Unwinder::Impl* impl;
  const ThreadCopy* thread;
  memory::BufferMemory stack;
  std::optional<elf::Location> last_file = std::nullopt;  // where the last file read was
  std::size_t live_reads = 0;
  std::size_t failed_reads = 0;  // reads no source could serve, during the current step
};

WalkContext& context_of(void* arg) {
  return *static_cast<WalkContext*>(arg);
}

int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need_unwind_info,
                   void* arg) {
  auto& ctx = context_of(arg);
  const auto location = ctx.impl->image.locate(ip);
  if (!location || location->module == nullptr) return -UNW_ENOINFO;
  const elf::Module& module = *location->module;
  const auto& hdr = module.eh_frame_hdr();
  if (!hdr || hdr->table_encoding != elf::kEhPeDatarelSdata4) return -UNW_ENOINFO;
  unw_dyn_info_t info{};
  info.format = UNW_INFO_FORMAT_REMOTE_TABLE;
  // The executable segment that holds ip bounds the table's validity.
  info.start_ip = location->mapping->start;
  info.end_ip = location->mapping->end;
  for (const auto& seg : module.elf().segments()) {
    if (seg.type == PT_LOAD && (seg.flags & PF_X) && location->vaddr >= seg.vaddr &&
        location->vaddr - seg.vaddr < seg.memory_size) {
      info.start_ip = seg.vaddr + location->bias;
      info.end_ip = seg.vaddr + seg.memory_size + location->bias;
    }
  }
  const auto* eh_segment = module.elf().first_segment(PT_GNU_EH_FRAME);
  info.u.rti.segbase = eh_segment->vaddr + location->bias;
  info.u.rti.table_data = hdr->table_vaddr + location->bias;
  info.u.rti.table_len = hdr->fde_count * 8 / sizeof(unw_word_t);
  return arch::search_unwind_table(as, ip, &info, pi, need_unwind_info, arg);
}

void put_unwind_info(unw_addr_space_t, unw_proc_info_t*, void*) {}

int get_dyn_info_list_addr(unw_addr_space_t, unw_word_t*, void*) {
  return -UNW_ENOINFO;
}

int access_mem(unw_addr_space_t, unw_word_t address, unw_word_t* value, int write, void* arg) {
  if (write) return -UNW_EINVAL;
  auto& ctx = context_of(arg);
  if (ctx.stack.read_exact(address, value, sizeof *value)) return 0;
  if (ctx.impl->image.read_file_backed(address, value, sizeof *value, &ctx.last_file) ==
      sizeof *value) {
    return 0;
  }
  if (ctx.impl->live != nullptr && ctx.impl->live->read_exact(address, value, sizeof *value)) {
    ++ctx.live_reads;
    return 0;
  }
  ++ctx.failed_reads;
  return -UNW_EINVAL;
}

int access_reg(unw_addr_space_t, unw_regnum_t number, unw_word_t* value, int write, void* arg) {
  if (write) return -UNW_EINVAL;
  const auto reg = context_of(arg).thread->registers.by_unwind_number(number);
  if (!reg) return -UNW_EBADREG;
  *value = *reg;
  return 0;
}

int access_fpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) {
  return -UNW_EBADREG;
}

int resume(unw_addr_space_t, unw_cursor_t*, void*) {
  return -UNW_EINVAL;
}

int get_proc_name(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*) {
  return -UNW_ENOINFO;  // hangscope symbolizes from its own ELF reader, after the walk
}

unw_accessors_t make_accessors() {
  unw_accessors_t a{};
  a.find_proc_info = find_proc_info;
  a.put_unwind_info = put_unwind_info;
  a.get_dyn_info_list_addr = get_dyn_info_list_addr;
  a.access_mem = access_mem;
  a.access_reg = access_reg;
  a.access_fpreg = access_fpreg;
  a.resume = resume;
  a.get_proc_name = get_proc_name;
  return a;
}

}  // namespace

Unwinder::Unwinder(elf::ProcessImage& image, memory::MemoryReader* live)
    : impl_(new Impl{image, live}) {
  unw_accessors_t accessors = make_accessors();
  impl_->address_space = unw_create_addr_space(&accessors, 0);
  if (impl_->address_space == nullptr) throw Error("libunwind: cannot create an address space");
  unw_set_caching_policy(impl_->address_space, UNW_CACHE_GLOBAL);
}

Unwinder::~Unwinder() {
  if (impl_ && impl_->address_space) unw_destroy_addr_space(impl_->address_space);
}

UnwindResult Unwinder::unwind(const ThreadCopy& thread, std::size_t max_frames) {
  UnwindResult result;
  WalkContext ctx{
      impl_.get(), &thread,
      memory::BufferMemory(thread.stack_start, thread.stack.data(), thread.stack.size())};
  unw_cursor_t cursor;
  if (const int rc = unw_init_remote(&cursor, impl_->address_space, &ctx); rc < 0) {
    result.end = WalkEnd::kUnwindFailed;
    result.stop_reason = std::string("libunwind init failed: ") + unw_strerror(rc);
    return result;
  }
  std::uint64_t previous_sp = 0;
  for (;;) {
    unw_word_t pc = 0, sp = 0;
    unw_get_reg(&cursor, UNW_REG_IP, &pc);
    unw_get_reg(&cursor, UNW_REG_SP, &sp);
    if (pc == 0) break;
    if (!result.frames.empty() && sp < previous_sp) {
      result.end = WalkEnd::kStackPointerBackwards;
      result.stop_reason = "stack pointer went backwards: unwind stopped";
      break;
    }
    previous_sp = sp;
    result.frames.push_back({pc, unw_is_signal_frame(&cursor) > 0});
    if (result.frames.size() >= max_frames) {
      result.end = WalkEnd::kFrameLimit;
      result.stop_reason = "stopped after " + std::to_string(max_frames) + " frames";
      break;
    }
    ctx.failed_reads = 0;
    const int step = unw_step(&cursor);
    if (step == 0) break;
    if (step < 0) {
      // A step that failed after a read no source could serve failed for want of memory
      // (libunwind passes on more than one code for that); otherwise its code says why.
      result.end = ctx.failed_reads > 0   ? WalkEnd::kUnreadableMemory
                   : step == -UNW_ENOINFO ? WalkEnd::kNoUnwindInfo
                                          : WalkEnd::kUnwindFailed;
      result.stop_reason = std::string("unwind stopped: ") + unw_strerror(step);
      break;
    }
  }
  result.live_reads = ctx.live_reads;
  return result;
}

}  // namespace hangscope::native
