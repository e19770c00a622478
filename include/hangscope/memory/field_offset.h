// Typed field offsets: where a field of a C structure in the target lies, and its C type, so
// that a read of the field returns that type and no read site chooses one of its own.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>

namespace hangscope::memory {

// An address in the target (a C pointer there, 8 bytes on x86-64).
using RemoteAddress = std::uint64_t;

// The byte offset of a field from the start of its structure, and the field's C type T
// (std::int32_t for `int`, RemoteAddress for pointers, std::uint8_t for `char`...). For an
// array member (`PyObject *ob_item[1]`), T is the element type and the offset its first item.
template <typename T>
struct FieldOffset {
  static_assert(std::is_trivially_copyable_v<T>);
  using type = T;

  std::uint64_t offset = 0;

  constexpr FieldOffset() = default;
  constexpr explicit FieldOffset(std::uint64_t at) : offset(at) {}

  // Where the field is in an object at `base` (wraps around for garbage bases, which no read
  // then reaches).
  constexpr std::uint64_t in(std::uint64_t base) const { return base + offset; }
  // For an array member: where item `index` is in an object at `base`.
  constexpr std::uint64_t item(std::uint64_t base, std::uint64_t index) const {
    return base + offset + index * sizeof(T);
  }

  friend constexpr bool operator==(const FieldOffset&, const FieldOffset&) = default;
};

// The field of an object copied into `copy` from the object's start; nullopt when the field
// does not lie wholly inside the copy (offsets may come from the target: `offset + sizeof(T)`
// may wrap around).
template <typename T>
std::optional<T> field_in(std::span<const std::uint8_t> copy, FieldOffset<T> field) {
  if (field.offset > copy.size() || sizeof(T) > copy.size() - field.offset) return std::nullopt;
  T value;
  std::memcpy(&value, copy.data() + field.offset, sizeof(T));
  return value;
}

}  // namespace hangscope::memory
