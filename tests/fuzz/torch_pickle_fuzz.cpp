// Fuzz target: the strict reader of torch's C++ pickles (flight-recorder dumps, the default
// format). Feeds any bytes to collectives::unpickle_torch and serialises what it returns.
#include "fuzz_support.h"
#include "hangscope/collectives/torch_pickle.h"
#include "hangscope/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hangscope;
  try {
    const auto value = collectives::unpickle_torch(fuzz::input(data, size));
    (void)value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const Error&) {
  }
  return 0;
}
