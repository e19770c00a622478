// Whole numbers read from untrusted text (environment values, log lines, locals, cache keys):
// the whole text or nothing, and never an exception or overflow for a number too large.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>

namespace hangscope {

// The int that all of `text` spells in decimal (an optional '-', then digits); nullopt for
// anything else, including a number beyond int (std::stoi threw there).
inline std::optional<int> to_int(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace hangscope
