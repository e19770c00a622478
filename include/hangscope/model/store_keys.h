// The c10d store keys a waiting frame's local names, from the local's Python repr.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace hangscope::model {

// At most this many keys are taken from one repr (a store query asks for no more).
inline constexpr std::size_t kMaxStoreKeys = 256;

// The keys a Python repr names: "'arrive/3'", "['a/0', 'a/1']", "('k',)"; empty when none.
std::vector<std::string> keys_in_repr(const std::string& repr);

}  // namespace hangscope::model
