// Shared command-line helpers: durations, tokens, address lists.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace hangscope::cli {

// "500ms", "2s", "1.5m", "3" (seconds); nullopt when malformed or negative.
std::optional<std::chrono::milliseconds> parse_duration(const std::string& text);

// The token from --token-file (first line, trimmed), else $HANGSCOPE_TOKEN, else "".
// Throws hangscope::Error when the file cannot be read or is empty.
std::string load_token(const std::string& token_file);

// Agent addresses from "a:1,b:2" and from a hostfile (one HOST[:PORT] per line, # comments).
// Throws hangscope::Error naming the hostfile line that is malformed.
std::vector<std::string> agent_addresses(const std::string& agents, const std::string& hostfile);

}  // namespace hangscope::cli
