#include "hangscope/common/text.h"

#include <sstream>

namespace hangscope {

std::string trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r\n") - begin + 1);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
  }
  return out;
}

std::string join(const std::vector<std::string>& items, const std::string& separator,
                 std::size_t max_items) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < max_items; ++i) {
    out += (i ? separator : "") + items[i];
  }
  if (items.size() > max_items) {
    out += separator + "… and " + std::to_string(items.size() - max_items) + " more";
  }
  return out;
}

namespace {

// The length of the valid UTF-8 sequence at text[i], or 0 when the byte starts none.
std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  std::size_t length = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
  bool ok = length > 0 && i + length <= text.size();
  for (std::size_t k = 1; ok && k < length; ++k) {
    ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
  }
  if (ok && length > 1) {
    // No overlong forms, no surrogates, nothing past U+10FFFF.
    const auto c1 = static_cast<unsigned char>(text[i + 1]);
    ok = !(c == 0xC0 || c == 0xC1) && !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0) &&
         !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90) && c <= 0xF4;
  }
  return ok ? length : 0;
}

}  // namespace

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (const std::size_t length = utf8_sequence(text, i); length > 0) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  return out;
}

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t length = utf8_sequence(text, i);
    // C0 controls, DEL and the C1 controls U+0080-U+009F (a terminal reads U+009B as CSI).
    const bool control =
        length == 1 ? c < 0x20 || c == 0x7f
                    : length == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0;
    if (length > 0 && !control) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
      ++i;
    }
  }
  return out;
}

}  // namespace hangscope
