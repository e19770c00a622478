// The model's typed states (issue 33, item 3): each enum's name round-trips, and the names older
// files wrote read as the values code branches on.
#include <gtest/gtest.h>

#include <string>

#include "hangscope/model/bundle.h"

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

}  // namespace
}  // namespace hangscope::model
