// Shared command-line helpers: usage errors, durations, tokens, addresses, output paths.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/common/error.h"

namespace hangscope::cli {

// Wrong, malformed or conflicting options, found before any sampling: exit code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// "500ms", "2s", "1.5m", "3" (seconds); nullopt when malformed, negative or over a day.
std::optional<std::chrono::milliseconds> parse_duration(const std::string& text);

// The duration of `option` (e.g. "--interval"); throws UsageError naming it when malformed.
std::chrono::milliseconds duration_option(const std::string& option, const std::string& text);

// The token from --token-file (first line, trimmed), else $HANGSCOPE_TOKEN, else "".
// Throws UsageError when the file cannot be read or is empty.
std::string load_token(const std::string& token_file);

// "HOST:PORT", "HOST" (default port), "[IPv6]:PORT" or "[IPv6]" → "host:port" / "[v6]:port".
// PORT is 1-65535 (0 too when `allow_port_zero`: pick a free one). An IPv6 address must be in
// brackets. Throws UsageError with the reason (the caller names the option).
std::string parse_address(const std::string& text, int default_port, bool allow_port_zero);

// Agent addresses from "a:1,b:2" and from a hostfile (one HOST[:PORT] per line, # comments),
// each checked by parse_address and given the default port. Throws UsageError naming the
// option or hostfile line that is wrong, or a hostfile that names no agent.
std::vector<std::string> agent_addresses(const std::string& agents, const std::string& hostfile);

// Throws UsageError "OPTION 'PATTERN': not a valid regular expression (RE2 syntax): why".
void check_regex(const std::string& option, const std::string& pattern);

// Makes `dir` ready for a bundle before any capture: creates it (its parent must exist),
// refuses an existing non-empty directory unless `force`, which first removes an earlier
// bundle's files by name (report::remove_earlier_bundle; a directory holding anything else is
// refused, naming the first foreign entry, and nothing is removed), and checks that a file can
// be created in it.
// Throws UsageError for what the user must change, Error for a failed system call.
void prepare_output_dir(const std::string& dir, bool force);

// Checks before any capture that `path` can be written as a file (not a directory; its
// directory exists and is writable). Leaves an existing file as it is.
void check_output_file(const std::string& path);

}  // namespace hangscope::cli
