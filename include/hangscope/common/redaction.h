// Masking of values that may be secrets (tokens, keys, passwords) before anything is shown.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace hangscope {

inline constexpr std::string_view kMasked = "<masked>";

// True for names like api_key, HF_TOKEN, password, secret, credentials, auth.
bool is_secret_name(std::string_view name);

// True for values that look like credentials whatever their name ("Bearer …", "hf_…", "sk-…").
bool looks_like_secret(std::string_view value);

// "https://user:pw@host/x" → "https://user:<masked>@host/x", anywhere in the text.
std::string mask_url_credentials(std::string_view text);

// The value, or <masked> when the name or the value says it is a secret (URL passwords masked).
std::string mask_if_secret(std::string_view name, std::string_view value);

// A command line (arguments separated by spaces) with secret values masked:
// `--api-key X`, `--token=X`, and arguments that look like credentials.
std::string mask_command_line(std::string_view command_line);

// The environment variables worth keeping (rank and parallelism settings, NCCL_*, GLOO_*,
// VLLM_*, RAY_*, TORCH_*, ...), with secret values masked; everything else is dropped.
std::map<std::string, std::string> filter_environment(
    const std::map<std::string, std::string>& env);

}  // namespace hangscope
