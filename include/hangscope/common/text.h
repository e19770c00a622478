// Small text helpers shared by the parsers of tools' and /proc output: trimming, lines, joins.
#pragma once

#include <string>
#include <vector>

namespace hangscope {

// The text without leading and trailing spaces, tabs, CR and LF.
std::string trim(const std::string& text);

// The lines of a text, without their "\n" (and a trailing "\r").
std::vector<std::string> split_lines(const std::string& text);

// "a, b, c"; past `max_items` items: "…, and N more" instead of the rest.
std::string join(const std::vector<std::string>& items, const std::string& separator,
                 std::size_t max_items = static_cast<std::size_t>(-1));

}  // namespace hangscope
