#include "hangscope/common/redaction.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

namespace hangscope {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A name that holds a token (HF_TOKEN, api_token, --hf-token, authToken, token) rather than a
// count or ids of tokens (max_tokens, prompt_tokens, token_ids, tokenizer): one of its words
// (split at '_', '-', '.') ends in "token" and the next word is not a count or ids.
bool names_a_token(const std::string& lowered) {
  std::vector<std::string_view> words;
  std::string_view rest = lowered;
  while (!rest.empty()) {
    const auto cut = rest.find_first_of("_-.");
    words.push_back(rest.substr(0, cut));
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 1);
  }
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (!words[i].ends_with("token")) continue;
    if (i + 1 < words.size()) {
      const auto next = words[i + 1];
      if (next == "id" || next == "ids" || next == "count" || next == "counts" || next == "num" ||
          next == "len" || next == "length" || next == "budget" || next == "usage") {
        continue;
      }
    }
    return true;
  }
  return false;
}

}  // namespace

bool is_secret_name(std::string_view name) {
  const std::string n = lower(name);
  if (names_a_token(n)) return true;
  for (std::string_view word : {"secret", "password", "passwd", "api_key", "apikey", "api-key",
                                "access_key", "private_key", "credential", "authoriz"}) {
    if (n.find(word) != std::string::npos) return true;
  }
  if (n == "auth" || n.rfind("auth_", 0) == 0 || (n.size() > 5 && n.ends_with("_auth")))
    return true;
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

// What the ECMAScript regex ([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+):[^@\s/]+@ replaced with
// "$1:<masked>@", scanned by hand: std::regex recursed once per character and overflowed the
// stack on a value of about 100 KB (an environment variable may hold 128 KiB). A match is
// "://" after a scheme (a letter, then letters, digits, + . -), a user up to the first ':',
// then a password up to '@' (neither holds '/', '@' or white space; the user no ':').
std::string mask_url_credentials(std::string_view text) {
  const auto ascii_letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
  const auto scheme_char = [&](char c) {
    return ascii_letter(c) || (c >= '0' && c <= '9') || c == '+' || c == '.' || c == '-';
  };
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  std::string out;
  std::size_t copied = 0;  // text[0, copied) is in `out`
  for (std::size_t sep = text.find("://"); sep != std::string_view::npos;
       sep = text.find("://", sep + 1)) {
    // The scheme: the run of scheme characters before "://" (after the last match), from its
    // first letter on.
    std::size_t start = sep;
    while (start > copied && scheme_char(text[start - 1])) --start;
    while (start < sep && !ascii_letter(text[start])) ++start;
    if (start == sep) continue;
    std::size_t user_end = sep + 3;
    while (user_end < text.size() && text[user_end] != '/' && text[user_end] != ':' &&
           text[user_end] != '@' && !space(text[user_end])) {
      ++user_end;
    }
    if (user_end == sep + 3 || user_end >= text.size() || text[user_end] != ':') continue;
    std::size_t password_end = user_end + 1;
    while (password_end < text.size() && text[password_end] != '@' && text[password_end] != '/' &&
           !space(text[password_end])) {
      ++password_end;
    }
    if (password_end == user_end + 1 || password_end >= text.size() || text[password_end] != '@') {
      continue;
    }
    out.append(text.substr(copied, user_end + 1 - copied));
    out.append(kMasked);
    out += '@';
    copied = password_end + 1;
    sep = password_end;  // the next match starts after this one
  }
  out.append(text.substr(copied));
  return out;
}

std::string mask_if_secret(std::string_view name, std::string_view value) {
  if (is_secret_name(name) || looks_like_secret(value)) return std::string(kMasked);
  return mask_url_credentials(value);
}

std::string mask_command_line(std::string_view command_line) {
  std::string out;
  bool mask_next = false;
  std::size_t pos = 0;
  while (pos <= command_line.size()) {
    auto end = command_line.find(' ', pos);
    if (end == std::string_view::npos) end = command_line.size();
    std::string_view arg = command_line.substr(pos, end - pos);
    pos = end + 1;
    if (!out.empty()) out += ' ';
    if (mask_next && !arg.empty()) {
      out += kMasked;
      mask_next = false;
      continue;
    }
    const auto eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    std::string_view bare = name;
    while (!bare.empty() && bare.front() == '-') bare.remove_prefix(1);
    const bool secret_name = !bare.empty() && is_secret_name(bare);
    if (secret_name && eq != std::string_view::npos) {
      out += std::string(arg.substr(0, eq + 1)) + std::string(kMasked);
    } else if (secret_name && name.front() == '-') {
      out += arg;
      mask_next = true;
    } else if (looks_like_secret(arg)) {
      out += kMasked;
    } else {
      out += arg;
    }
    if (end == command_line.size()) break;
  }
  return mask_url_credentials(out);
}

std::map<std::string, std::string> filter_environment(
    const std::map<std::string, std::string>& env) {
  static constexpr std::string_view kNames[] = {"RANK",
                                                "LOCAL_RANK",
                                                "WORLD_SIZE",
                                                "LOCAL_WORLD_SIZE",
                                                "GROUP_RANK",
                                                "ROLE_RANK",
                                                "MASTER_ADDR",
                                                "MASTER_PORT",
                                                "CUDA_VISIBLE_DEVICES",
                                                "OMP_NUM_THREADS",
                                                "PYTHONPATH",
                                                "TORCHELASTIC_RUN_ID",
                                                "HANGSCOPE_JOB"};
  static constexpr std::string_view kPrefixes[] = {
      "NCCL_",          "GLOO_",       "VLLM_",   "RAY_",     "TORCH_",
      "TORCHINDUCTOR_", "FLASHINFER_", "SGLANG_", "PYTORCH_", "NVIDIA_"};
  std::map<std::string, std::string> kept;
  for (const auto& [name, value] : env) {
    bool keep = false;
    for (auto n : kNames) keep = keep || name == n;
    for (auto p : kPrefixes) keep = keep || std::string_view(name).substr(0, p.size()) == p;
    if (keep) kept[name] = mask_if_secret(name, value);
  }
  return kept;
}

}  // namespace hangscope
