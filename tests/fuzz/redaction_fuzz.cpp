// Fuzz target: the masking of secrets in what capture copies out of a target (command lines,
// environment values, log lines, locals). The input is a command line / value; its first
// line also serves as a variable name. Feeds mask_command_line, mask_if_secret,
// mask_url_credentials and filter_environment (KEY=VALUE lines), and checks
// mask_url_credentials against the std::regex it replaced (on inputs short enough for
// std::regex's recursion): both must mask exactly the same passwords.
#include <map>
#include <regex>

#include "fuzz_support.h"
#include "hangscope/common/redaction.h"
#include "hangscope/common/text.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  const std::string text = fuzz::input(data, size);
  const auto lines = split_lines(text);
  const std::string name = lines.empty() ? "" : lines.front();
  (void)mask_command_line(text);
  (void)mask_if_secret(name, text);
  const std::string masked = mask_url_credentials(text);
  if (text.size() <= 1024) {  // (std::regex is slow: keep the target fast)
    static const std::regex credentials(R"(([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+):[^@\s/]+@)");
    if (masked != std::regex_replace(text, credentials, "$1:<masked>@")) __builtin_trap();
  }
  std::map<std::string, std::string> env;
  for (const auto& line : lines) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  (void)filter_environment(env);
  return 0;
}
