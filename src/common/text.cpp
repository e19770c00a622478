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

}  // namespace hangscope
