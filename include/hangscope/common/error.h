// Errors with context: an exception type for failures and helpers that name the errno reason.
#pragma once

#include <stdexcept>
#include <string>

namespace hangscope {

// A failure that names what was being done and why it failed, ready to show to a user.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// "what: strerror(err)", for messages built from a failed system call.
std::string errno_message(const std::string& what, int err);

// Throws Error(errno_message(what, err)).
[[noreturn]] void throw_errno(const std::string& what, int err);

}  // namespace hangscope
