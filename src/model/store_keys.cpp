#include "hangscope/model/store_keys.h"

namespace hangscope::model {
namespace {

// The quoted strings of a repr, as the ECMAScript regex '((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"
// finds them (a quote, then anything but that quote or a backslash, or a backslash and any
// character but a line break, up to the same quote; searched again after an unclosed one),
// without std::regex: it recursed once per character and overflowed the stack on a long
// string (a local's repr from a snapshot file).
std::vector<std::string> quoted_strings(const std::string& text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    const char quote = text[i];
    if (quote != '\'' && quote != '"') {
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    while (j < text.size() && text[j] != quote) {
      if (text[j] != '\\') {
        ++j;
      } else if (j + 1 < text.size() && text[j + 1] != '\n' && text[j + 1] != '\r') {
        j += 2;
      } else {
        break;  // a backslash before a line break or the end: no string from this quote
      }
    }
    if (j >= text.size() || text[j] != quote) {
      ++i;
      continue;
    }
    out.push_back(text.substr(i + 1, j - i - 1));
    i = j + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> keys_in_repr(const std::string& repr) {
  std::vector<std::string> keys;
  for (const auto& key : quoted_strings(repr)) {
    if (keys.size() >= kMaxStoreKeys) break;
    // A repr escapes a backslash and its own quote; nothing else is unescaped here.
    std::string plain;
    for (std::size_t i = 0; i < key.size(); ++i) {
      if (key[i] == '\\' && i + 1 < key.size() &&
          (key[i + 1] == '\\' || key[i + 1] == '\'' || key[i + 1] == '"')) {
        ++i;
      }
      plain += key[i];
    }
    if (!plain.empty()) keys.push_back(plain);
  }
  return keys;
}

}  // namespace hangscope::model
