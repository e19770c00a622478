// Fuzz target: the strict reader of torch's C++ pickles (flight-recorder dumps, the default
// format). Feeds any bytes to collectives::unpickle_torch and serialises what it returns.
// Amplification (issue 30): the expansion budget is smaller than the default (the same code at
// any size, more inputs a second), and a value that comes back must fit that budget: a path that
// expands without counting is a crash here, as is one allocation of 512 MiB or more
// (-malloc_limit_mb, tests/fuzz/options/torch_pickle).
#include "fuzz_support.h"
#include "hangscope/collectives/torch_pickle.h"
#include "hangscope/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  collectives::PickleLimits limits;
  limits.max_expanded_values = 1u << 16;
  limits.max_expanded_bytes = 4u << 20;
  try {
    const auto value = collectives::unpickle_torch(fuzz::input(data, size), limits);
    const auto text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    // Each value prints as at most ~30 bytes of its own, strings as at most 6 bytes a byte
    // (\u escapes), keys included.
    if (text.size() > limits.max_expanded_values * 32 + limits.max_expanded_bytes * 6) {
      __builtin_trap();
    }
  } catch (const Error&) {
  }
  return 0;
}
