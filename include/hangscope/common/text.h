// Small text helpers shared by the parsers of tools' and /proc output: trimming, lines, joins.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hangscope {

// The text without leading and trailing spaces, tabs, CR and LF.
std::string trim(const std::string& text);

// The lines of a text, without their "\n" (and a trailing "\r").
std::vector<std::string> split_lines(const std::string& text);

// `text` with every byte that is not part of valid UTF-8 replaced by U+FFFD: what a target's
// memory, files or command line hold is not always text, and protobuf's string fields (and
// JSON) take only valid UTF-8.
std::string valid_utf8(std::string_view text);

// `text` as one line that is safe to print on a terminal: valid UTF-8 stays, every control
// character (newlines and escape sequences included) and every byte that is not valid UTF-8
// becomes "\xNN". For messages that quote bytes of a file or a peer.
std::string printable(std::string_view text);

// "a, b, c"; past `max_items` items: "…, and N more" instead of the rest.
std::string join(const std::vector<std::string>& items, const std::string& separator,
                 std::size_t max_items = static_cast<std::size_t>(-1));

}  // namespace hangscope
