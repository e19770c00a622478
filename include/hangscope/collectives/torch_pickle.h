// A strict reader for the pickles torch's C++ Pickler writes (protocol 2), as in flight-recorder
// dumps: only the opcodes that Pickler emits for dicts, lists, tuples, strings, numbers, bools
// and None (plus its type-tag and specialised-list globals). Anything else — objects, tensors,
// arbitrary globals — is refused with the opcode and its offset, so no input runs code.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace hangscope::collectives {

// The pickled value as JSON: dicts become objects (non-string keys as their text), lists and
// tuples arrays, None null. Throws hangscope::Error "pickle offset N: reason".
nlohmann::json unpickle_torch(const std::string& bytes);

}  // namespace hangscope::collectives
