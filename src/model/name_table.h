// The name of an enum value in a table of (value, name) pairs, and the value a name stands for:
// the one pair of lookups behind the model's to_string / parse functions.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <utility>

namespace hangscope::model::names {

template <typename Value, std::size_t N>
using Table = std::array<std::pair<Value, std::string_view>, N>;

// The name of `value` in `table`, or `fallback`.
template <typename Value, std::size_t N>
constexpr std::string_view name_in(const Table<Value, N>& table, Value value,
                                   std::string_view fallback) {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return fallback;
}

// The value `name` stands for in `table`, or `fallback`.
template <typename Value, std::size_t N>
constexpr Value value_in(const Table<Value, N>& table, std::string_view name, Value fallback) {
  for (const auto& [v, text] : table) {
    if (text == name) return v;
  }
  return fallback;
}

}  // namespace hangscope::model::names
