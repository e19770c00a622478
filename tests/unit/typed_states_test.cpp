// The model's typed states (issue 33, item 3): each enum's name round-trips, and the names older
// files wrote read as the values code branches on.
#include <gtest/gtest.h>

#include <string>

#include "hangscope/model/bundle.h"
#include "hangscope/model/connections.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/model/flight_record.h"
#include "hangscope/model/process_dump.h"
#include "hangscope/model/socket_state.h"

namespace hangscope::model {
namespace {

TEST(TypedStates, NodeStateNamesRoundTrip) {
  for (const auto state : {NodeState::kOk, NodeState::kUnreachable, NodeState::kRefused,
                           NodeState::kBusy, NodeState::kError}) {
    EXPECT_EQ(parse_node_state(to_string(state)), state) << to_string(state);
  }
  EXPECT_EQ(to_string(NodeState::kOk), "ok");
  EXPECT_EQ(to_string(NodeState::kUnreachable), "unreachable");
  EXPECT_EQ(to_string(NodeState::kRefused), "refused");
  EXPECT_EQ(to_string(NodeState::kBusy), "busy");
  EXPECT_EQ(to_string(NodeState::kError), "error");
}

TEST(TypedStates, AnUnknownNodeStateNameIsAnError) {
  EXPECT_EQ(parse_node_state(""), NodeState::kError);
  EXPECT_EQ(parse_node_state("sleeping"), NodeState::kError);
  EXPECT_EQ(parse_node_state("OK"), NodeState::kError);
}

TEST(TypedStates, FlightStateNamesRoundTrip) {
  for (const auto state : {FlightState::kUnknown, FlightState::kScheduled, FlightState::kStarted,
                           FlightState::kCompleted}) {
    EXPECT_EQ(parse_flight_state(to_string(state)), state) << to_string(state);
  }
  EXPECT_EQ(to_string(FlightState::kScheduled), "scheduled");
  EXPECT_EQ(to_string(FlightState::kStarted), "started");
  EXPECT_EQ(to_string(FlightState::kCompleted), "completed");
  EXPECT_EQ(to_string(FlightState::kUnknown), "");
  EXPECT_EQ(parse_flight_state("retired"), FlightState::kUnknown);
  EXPECT_EQ(parse_flight_state("Completed"), FlightState::kUnknown);
}

TEST(TypedStates, AFlightEntryDescribesItsStateByName) {
  FlightEntry e;
  e.profiling_name = "nccl:all_reduce";
  e.collective_seq_id = 12;
  e.input_sizes = "[[3,4]]";
  e.input_dtypes = "[\"Float\"]";
  e.state = FlightState::kStarted;
  EXPECT_EQ(e.describe(), "nccl:all_reduce #12 [[3,4]] [\"Float\"] started");
  e.state = FlightState::kUnknown;
  EXPECT_EQ(e.describe(), "nccl:all_reduce #12 [[3,4]] [\"Float\"]");
}

// The kernel's numbers, 1 (ESTABLISHED) to 11 (CLOSING), are the enum's; others are unknown.
TEST(TypedStates, SocketStatesAreTheKernelsNumbers) {
  EXPECT_EQ(socket_state_from_kernel(0x01), SocketState::kEstablished);
  EXPECT_EQ(socket_state_from_kernel(0x02), SocketState::kSynSent);
  EXPECT_EQ(socket_state_from_kernel(0x03), SocketState::kSynRecv);
  EXPECT_EQ(socket_state_from_kernel(0x07), SocketState::kClose);
  EXPECT_EQ(socket_state_from_kernel(0x0A), SocketState::kListen);
  EXPECT_EQ(socket_state_from_kernel(0x0B), SocketState::kClosing);
  EXPECT_EQ(socket_state_from_kernel(0x0C), SocketState::kUnknown);
  EXPECT_EQ(socket_state_from_kernel(0), SocketState::kUnknown);
  EXPECT_EQ(socket_state_from_kernel(255), SocketState::kUnknown);
}

TEST(TypedStates, SocketStateNamesRoundTripForEachFamily) {
  for (unsigned n = 0; n <= 11; ++n) {
    const auto state = socket_state_from_kernel(n);
    EXPECT_EQ(parse_tcp_state(tcp_state_name(state)), state) << tcp_state_name(state);
    EXPECT_EQ(parse_unix_state(unix_state_name(state)), state) << unix_state_name(state);
  }
  EXPECT_EQ(tcp_state_name(SocketState::kEstablished), "established");
  EXPECT_EQ(tcp_state_name(SocketState::kSynRecv), "syn-recv");
  EXPECT_EQ(tcp_state_name(SocketState::kFinWait1), "fin-wait1");
  EXPECT_EQ(tcp_state_name(SocketState::kCloseWait), "close-wait");
  EXPECT_EQ(tcp_state_name(SocketState::kListen), "listen");
  EXPECT_EQ(tcp_state_name(SocketState::kUnknown), "unknown");
  EXPECT_EQ(unix_state_name(SocketState::kEstablished), "connected");
  EXPECT_EQ(unix_state_name(SocketState::kListen), "listen");
  EXPECT_EQ(unix_state_name(SocketState::kClose), "unconnected");
  EXPECT_EQ(parse_tcp_state("state 13"), SocketState::kUnknown);
  EXPECT_EQ(parse_unix_state(""), SocketState::kUnknown);
}

TEST(TypedStates, ASocketNamesItsStateForItsFamily) {
  Socket s;
  s.state = SocketState::kEstablished;
  EXPECT_EQ(s.state_name(), "connected");  // unix, the default family
  s.family = Socket::Family::kTcp;
  EXPECT_EQ(s.state_name(), "established");
}

Socket tcp_socket(std::string local, std::string remote, SocketState state) {
  Socket s;
  s.family = Socket::Family::kTcp;
  s.state = state;
  s.local = std::move(local);
  s.remote = std::move(remote);
  return s;
}

// A process's TCP connections come from its sockets when they were captured, listeners
// included, in fd order; unix sockets are not among them.
TEST(TcpConnections, FromTheCapturedSocketsFirst) {
  ProcessRecord p;
  p.dump = ProcessDump();
  Socket unix_socket;
  unix_socket.state = SocketState::kEstablished;
  p.dump->sockets = {tcp_socket("10.0.0.1:5555", "0.0.0.0:0", SocketState::kListen), unix_socket,
                     tcp_socket("10.0.0.1:5555", "10.0.0.2:41000", SocketState::kEstablished)};
  p.facts[fact_keys::kNetTcp] = "10.0.0.1:1>10.0.0.9:2";  // read at another moment: not used
  const auto got = tcp_connections(p);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, (std::vector<TcpConnection>{
                      {"10.0.0.1:5555", "0.0.0.0:0", SocketState::kListen},
                      {"10.0.0.1:5555", "10.0.0.2:41000", SocketState::kEstablished}}));
}

// Older files and captures without sockets: the net.tcp fact, established and connecting.
TEST(TcpConnections, FromTheNetTcpFactWithoutSockets) {
  ProcessRecord p;
  p.facts[fact_keys::kNetTcp] = "10.0.0.1:41000>10.0.0.2:5555 10.0.0.1:41002~10.0.0.3:5555";
  auto got = tcp_connections(p);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, (std::vector<TcpConnection>{
                      {"10.0.0.1:41000", "10.0.0.2:5555", SocketState::kEstablished},
                      {"10.0.0.1:41002", "10.0.0.3:5555", SocketState::kSynSent}}));
  p.dump = ProcessDump();  // a dump without sockets (captured without them)
  EXPECT_EQ(tcp_connections(p), got);
  p.facts[fact_keys::kNetTcp] = "";
  ASSERT_TRUE(tcp_connections(p));
  EXPECT_TRUE(tcp_connections(p)->empty());
}

// Unknown (not an empty list) without sockets or fact, and when the fact alone is there and
// was cut short; captured sockets are every one the process holds, the fact's cut aside.
TEST(TcpConnections, UnknownWithoutEitherOrWhenTheFactIsCutShort) {
  ProcessRecord p;
  EXPECT_FALSE(tcp_connections(p));
  p.facts[fact_keys::kNetTcp] = "10.0.0.1:41000>10.0.0.2:5555";
  p.facts[fact_keys::kNetTcpTruncated] = "12";
  EXPECT_FALSE(tcp_connections(p));
  p.dump = ProcessDump();
  EXPECT_FALSE(tcp_connections(p));  // a dump without sockets: still the fact
  p.dump->sockets = {tcp_socket("10.0.0.1:41000", "10.0.0.2:5555", SocketState::kEstablished)};
  ASSERT_TRUE(tcp_connections(p));
  EXPECT_EQ(tcp_connections(p)->size(), 1u);
}

}  // namespace
}  // namespace hangscope::model
