// The kernel's sock_diag netlink interface, as the socket readers use it (capture's unix
// sockets, facts' TCP sockets): a dump asked for and its answers received, and the netlink
// messages of one answer walked with bounds checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string_view>

namespace hangscope {

// Sends `request` (a netlink header and its body, `size` bytes) on a NETLINK_SOCK_DIAG socket of
// the calling thread's network namespace and hands each answer (one recv) to `answer` until it
// returns true (the dump ended). Bounded: 5 s at most. Throws Error (SystemError for a failed
// call) naming `what` ("unix sockets").
void sock_diag_dump(const void* request, std::size_t size, const char* what,
                    const std::function<bool(std::string_view answer)>& answer);

// The netlink messages of one answer: each SOCK_DIAG_BY_FAMILY (or inet_diag's older
// TCPDIAG_GETSOCK) message's body handed to `message` with the offset of its header. True when
// NLMSG_DONE ends them. Throws Error "`name` at byte N: …" for a message cut short or malformed,
// and SystemError(`refusal`, errno) for an NLMSG_ERROR.
bool walk_sock_diag_answer(
    std::string_view bytes, const char* name, const char* refusal,
    const std::function<void(std::string_view body, std::size_t offset)>& message);

// A native-endian integer at `offset` of `bytes` (netlink speaks the host's byte order); the
// caller checked the bounds.
template <typename T>
T netlink_value(std::string_view bytes, std::size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

}  // namespace hangscope
