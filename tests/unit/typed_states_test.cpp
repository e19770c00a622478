// The model's typed states (issue 33, item 3): each enum's name round-trips, and the names older
// files wrote read as the values code branches on.
#include <gtest/gtest.h>

#include <string>

#include "hangscope/model/bundle.h"
#include "hangscope/model/flight_record.h"

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

}  // namespace
}  // namespace hangscope::model
