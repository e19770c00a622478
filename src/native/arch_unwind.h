// Private part of the architecture interface: the libunwind entry points named per architecture.
#pragma once

#include <libunwind.h>

namespace hangscope::native::arch {

// libunwind's binary search of an .eh_frame_hdr table in a remote address space.
int search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t* info,
                        unw_proc_info_t* proc_info, int need_unwind_info, void* arg);

}  // namespace hangscope::native::arch
