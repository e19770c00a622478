// Private to python/: how torch's C++ objects sit behind their Python objects (pybind11's
// holder) and where c10d::ProcessGroup keeps its rank, size and sequence number, as measured on
// Debian's torch 1.13; shared by the registry reader and the reader of groups found in frames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "hangscope/python/objects.h"

namespace hangscope::python::c10d {

// c10d::ProcessGroup in torch 1.13 (torch/csrc/distributed/c10d/ProcessGroup.hpp): after
// c10::intrusive_ptr_target (vtable, refcount, weakcount: 24 bytes) come `const int rank_`
// and `const int size_`; `c10::optional<SequenceNum> sequenceNum_` keeps its engaged flag at
// 40 and the number (uint64, set by _set_sequence_number_for_group, one more per collective)
// at 48. Measured on Debian's torch 1.13 (gloo): rank 0/1/2 and size 3 at 24/28, the same
// sequence number on every rank of a group.
inline constexpr std::size_t kRankOffset = 24;
inline constexpr std::size_t kSequenceFlagOffset = 40;
inline constexpr std::size_t kSequenceOffset = 48;

// The backend's options (c10d::ProcessGroup::Options, a CustomClassHolder: vtable, refcount,
// weakcount) hold `std::chrono::milliseconds timeout` at 24 and `const std::string backend` at
// 32 (libstdc++: data pointer, size, then the local buffer at 48 for short names). The C++
// ProcessGroupGloo of Debian's torch 1.13 points to them from offset 112 (measured: the
// timeouts given to init_process_group and new_group read back); other backends are searched.
inline constexpr std::size_t kGlooOptionsPointer = 112;
inline constexpr std::size_t kOptionsTimeout = 24;
inline constexpr std::size_t kOptionsBackend = 32;

// The C++ object a pybind11-held Python object wraps: pybind11's `struct instance` keeps the
// value pointer after PyObject_HEAD (simple layout, `indirect` false) or, with several
// registered bases, a pointer to its values-and-holders array (`indirect` true). nullopt when
// the pointer read is not a plausible address.
inline std::optional<std::uint64_t> held_value(ObjectReader& objects, std::uint64_t object,
                                               bool indirect = false) {
  constexpr std::uint64_t kValuePointer = 16;
  auto value = objects.pointer_at(object + kValuePointer);
  if (indirect && value && objects.plausible(*value)) value = objects.pointer_at(*value);
  if (!value || !objects.plausible(*value)) return std::nullopt;
  return value;
}

}  // namespace hangscope::python::c10d
