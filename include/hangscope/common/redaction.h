// Masking of values that may be secrets (tokens, keys, passwords) before anything is shown.
#pragma once

#include <string>
#include <string_view>

namespace hangscope {

inline constexpr std::string_view kMasked = "<masked>";

// True for names like api_key, HF_TOKEN, password, secret, credentials, auth.
bool is_secret_name(std::string_view name);

// True for values that look like credentials whatever their name ("Bearer …", "hf_…", "sk-…").
bool looks_like_secret(std::string_view value);

// The value, or <masked> when the name or the value says it is a secret.
std::string mask_if_secret(std::string_view name, std::string_view value);

}  // namespace hangscope
