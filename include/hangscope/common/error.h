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

// A failed system call: the message for people, its errno for callers that act on the cause
// (never on the message's text).
class SystemError : public Error {
 public:
  SystemError(const std::string& what, int err) : Error(errno_message(what, err)), errno_(err) {}
  int error_number() const { return errno_; }

 private:
  int errno_;
};

// Throws SystemError(what, err).
[[noreturn]] void throw_errno(const std::string& what, int err);

}  // namespace hangscope
