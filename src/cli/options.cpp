#include "hangscope/cli/options.h"

#include <fcntl.h>
#include <re2/re2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "hangscope/common/files.h"
#include "hangscope/common/text.h"
#include "hangscope/report/bundle_files.h"

namespace hangscope::cli {
namespace {

// The most a hostfile or token file may hold: a few thousand lines.
constexpr std::size_t kMaxSmallFileBytes = 16u << 20;

bool all_digits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

// A port number of an address: digits only, 1-65535 (or 0 when allowed).
int parse_port(const std::string& text, bool allow_zero) {
  if (!all_digits(text)) throw UsageError("port '" + printable(text) + "' is not a number");
  const long port = text.size() > 5 ? 65536 : std::strtol(text.c_str(), nullptr, 10);
  if (port > 65535 || (port == 0 && !allow_zero)) {
    throw UsageError("port " + printable(text) + " is outside " + (allow_zero ? "0" : "1") +
                     "-65535");
  }
  return static_cast<int>(port);
}

bool valid_host_name(const std::string& host) {
  if (host.empty() || host.size() > 253) return false;
  for (const char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

bool valid_ipv6(const std::string& host) {
  if (host.empty() || host.find(':') == std::string::npos) return false;
  for (const char c : host) {
    const bool ok = std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.' ||
                    c == '%' || std::isalnum(static_cast<unsigned char>(c));
    if (!ok) return false;
  }
  return true;
}

// Creates and removes a file in `dir`: a real check where access(2) would answer yes for root
// on a read-only file system.
void check_writable_dir(const std::string& dir, const std::string& what) {
  const std::string probe = dir + "/.hangscope-write-check-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw_errno(what + ": cannot write in " + printable(dir), errno);
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (!std::isfinite(value)) return std::nullopt;  // "inf", "nan"
  const std::string unit = text.substr(used);
  double ms = 0;
  if (unit.empty() || unit == "s")
    ms = value * 1000;
  else if (unit == "ms")
    ms = value;
  else if (unit == "m")
    ms = value * 60000;
  else
    return std::nullopt;
  if (ms < 0 || ms > 24.0 * 3600 * 1000) return std::nullopt;
  return std::chrono::milliseconds(static_cast<long long>(ms));
}

std::chrono::milliseconds duration_option(const std::string& option, const std::string& text) {
  const auto duration = parse_duration(text);
  if (!duration) {
    throw UsageError(option + " '" + printable(text) +
                     "': expected a duration like 500ms, 2s or 1m (at most 24 hours)");
  }
  return *duration;
}

std::string load_token(const std::string& token_file) {
  if (token_file.empty()) {
    const char* env = std::getenv("HANGSCOPE_TOKEN");
    return env ? trim(env) : "";
  }
  std::string text;
  try {
    text = read_input_file(token_file, "--token-file", kMaxSmallFileBytes, InputKind::kFileOrPipe);
  } catch (const Error& e) {
    throw UsageError(std::string("cannot read token file: ") + e.what());
  }
  const std::string line = trim(text.substr(0, text.find('\n')));
  if (line.empty()) throw UsageError("--token-file " + printable(token_file) + ": is empty");
  return line;
}

std::string parse_address(const std::string& text, int default_port, bool allow_port_zero) {
  if (text.empty()) throw UsageError("an empty address");
  std::string host, port;
  bool bracketed = false;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos) throw UsageError("'[' without ']' in an IPv6 address");
    host = text.substr(1, close - 1);
    bracketed = true;
    const std::string rest = text.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      throw UsageError("expected ':PORT' after ']', got '" + printable(rest) + "'");
    }
    if (!rest.empty()) port = rest.substr(1);
    if (!rest.empty() && port.empty()) throw UsageError("no port after ':'");
    if (!valid_ipv6(host)) throw UsageError("'" + printable(host) + "' is not an IPv6 address");
  } else {
    const auto colons = std::count(text.begin(), text.end(), ':');
    if (colons > 1) {
      throw UsageError("an IPv6 address goes in brackets: [" + printable(text) + "]:PORT");
    }
    const auto colon = text.find(':');
    host = text.substr(0, colon);
    if (colon != std::string::npos) {
      port = text.substr(colon + 1);
      if (port.empty()) throw UsageError("no port after ':'");
    }
    if (!valid_host_name(host)) {
      throw UsageError("'" + printable(host) + "' is not a host name or IPv4 address");
    }
  }
  const int number = port.empty() ? default_port : parse_port(port, allow_port_zero);
  return (bracketed ? "[" + host + "]" : host) + ":" + std::to_string(number);
}

std::vector<std::string> agent_addresses(const std::string& agents, const std::string& hostfile) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < agents.size()) {
    auto end = agents.find(',', pos);
    if (end == std::string::npos) end = agents.size();
    if (const auto a = trim(agents.substr(pos, end - pos)); !a.empty()) {
      try {
        out.push_back(parse_address(a, 7447, false));
      } catch (const UsageError& e) {
        throw UsageError("--agents '" + printable(a) + "': " + e.what());
      }
    }
    pos = end + 1;
  }
  if (!hostfile.empty()) {
    std::string text;
    try {
      text = read_input_file(hostfile, "--hostfile", kMaxSmallFileBytes, InputKind::kFileOrPipe);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    const auto before = out.size();
    int number = 0;
    for (auto line : split_lines(text)) {
      ++number;
      line = trim(line.substr(0, line.find('#')));
      if (line.empty()) continue;
      const std::string where = "--hostfile " + printable(hostfile) + ":" + std::to_string(number);
      if (line.find_first_of(" \t") != std::string::npos) {
        throw UsageError(where + ": expected one HOST[:PORT], got '" + printable(line) + "'");
      }
      try {
        out.push_back(parse_address(line, 7447, false));
      } catch (const UsageError& e) {
        throw UsageError(where + ": '" + printable(line) + "': " + e.what());
      }
    }
    if (out.size() == before) {
      throw UsageError("--hostfile " + printable(hostfile) +
                       ": names no agent (one HOST[:PORT] "
                       "per line)");
    }
  }
  return out;
}

void check_regex(const std::string& option, const std::string& pattern) {
  RE2::Options options;
  options.set_log_errors(false);
  const RE2 re(pattern, options);
  if (!re.ok()) {
    throw UsageError(option + " '" + printable(pattern) +
                     "': not a valid regular expression (RE2 syntax): " + re.error());
  }
}

void prepare_output_dir(const std::string& dir, bool force) {
  const std::string what = "-o " + printable(dir);
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) throw UsageError(what + ": exists and is not a directory");
    const auto entries = list_directory(dir);
    if (!entries) throw_errno(what + ": cannot list it", errno);
    if (!entries->empty()) {
      if (!force) {
        throw UsageError(what +
                         ": exists and is not empty (a bundle of another run would be merged "
                         "into this one): give a new directory, or --force to empty it first");
      }
      // --force removes a bundle's own files by name, and nothing when anything else is there.
      const std::string foreign = report::remove_earlier_bundle(dir);
      if (!foreign.empty()) {
        throw UsageError(what + ": holds " + printable(foreign) +
                         ", which is no file of a hangscope bundle: --force removes only an "
                         "earlier bundle's files, so nothing was removed; give a new directory");
      }
    }
  } else if (errno != ENOENT) {
    throw_errno(what, errno);
  } else if (::mkdir(dir.c_str(), 0755) != 0) {
    throw_errno(what + ": cannot create it", errno);
  }
  check_writable_dir(dir, "-o");
}

void check_output_file(const std::string& path) {
  const std::string what = "-o " + printable(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw UsageError(what + ": is a directory (a snapshot file is expected)");
  }
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0) throw_errno(what + ": directory " + printable(dir), errno);
  if (!S_ISDIR(st.st_mode)) throw UsageError(what + ": " + printable(dir) + " is not a directory");
  check_writable_dir(dir, "-o");
}

}  // namespace hangscope::cli
