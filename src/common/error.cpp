#include "hangscope/common/error.h"

#include <cstring>

namespace hangscope {

std::string errno_message(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

void throw_errno(const std::string& what, int err) {
  throw SystemError(what, err);
}

}  // namespace hangscope
