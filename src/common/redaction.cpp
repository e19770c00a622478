#include "hangscope/common/redaction.h"

#include <algorithm>
#include <cctype>

namespace hangscope {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

bool is_secret_name(std::string_view name) {
  const std::string n = lower(name);
  for (std::string_view word : {"token", "secret", "password", "passwd", "api_key", "apikey",
                                "access_key", "private_key", "credential", "auth"}) {
    if (n.find(word) != std::string::npos) return true;
  }
  // OPENAI_API_KEY, hf_key, ... but not a plain "key" (store keys are what a user needs to see).
  return n.size() > 4 && n.substr(n.size() - 4) == "_key";
}

bool looks_like_secret(std::string_view value) {
  std::string_view v = value;
  if (!v.empty() && (v.front() == '\'' || v.front() == '"')) v.remove_prefix(1);
  const std::string l = lower(v.substr(0, 16));
  return l.rfind("bearer ", 0) == 0 || l.rfind("basic ", 0) == 0 || l.rfind("hf_", 0) == 0 ||
         l.rfind("sk-", 0) == 0 || l.rfind("ghp_", 0) == 0 || l.rfind("xoxb-", 0) == 0 ||
         l.rfind("akia", 0) == 0;
}

std::string mask_if_secret(std::string_view name, std::string_view value) {
  if (is_secret_name(name) || looks_like_secret(value)) return std::string(kMasked);
  return std::string(value);
}

}  // namespace hangscope
