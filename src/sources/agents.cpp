// The agents' source: every node's agent asked at once (agent::collect_all), and whether every
// node took its samples when they were due.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "hangscope/sources/sources.h"
#include "node_answers.h"

namespace hangscope::sources {
namespace {

std::string ms_text(std::chrono::nanoseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f ms", static_cast<double>(d.count()) / 1e6);
  return text;
}

// What the fan-out tells, as the source's feedback.
class Listener final : public agent::FanoutListener {
 public:
  Listener(const Feedback& feedback, std::size_t nodes)
      : feedback_(feedback),
        nodes_(nodes),
        clocks_(feedback.start("reading the agents' clocks", "", nodes)) {}

  void clock_read(std::size_t, std::size_t) override { clocks_.add_done(1); }

  void sampling(const agent::FanoutTimes& times) override {
    clocks_.end();
    feedback_.say("sample 0 set " + ms_text(times.lead) + " ahead for " +
                  std::to_string(times.asked) + " node(s) (clocks read in " +
                  ms_text(times.clocks) + "; every request sent in " + ms_text(times.sent) + ")");
    if (times.sent > times.lead) {
      feedback_.warning("sending the Capture requests took " + ms_text(times.sent) +
                        ", past the moment set for sample 0 (" + ms_text(times.lead) +
                        " ahead): the last nodes sample late");
    }
    answers_ = feedback_.start("waiting for the agents' answers", "", nodes_);
    answers_.add_done(answered_before_);
    answering_ = true;
  }

  void answered(const agent::AgentAnswer& answer, std::size_t done, std::size_t total) override {
    if (answering_) {
      answers_.add_done(1);
    } else {
      ++answered_before_;
    }
    const bool failed = answer.status != model::NodeState::kOk;
    if (failed) ++failed_[answer.status];
    // Each failure is said up to kFailuresSaid; past them, a count at the end (every node is in
    // the report with its reason).
    const bool say_failure = failed && failures_said_ < kFailuresSaid;
    if (say_failure || (!failed && (total <= 16 || done % 256 == 0 || done == total))) {
      if (say_failure) ++failures_said_;
      feedback_.say(answer.address + ": " + std::string(model::to_string(answer.status)) +
                    (answer.error.empty() ? "" : " (" + answer.error + ")") + " [" +
                    std::to_string(done) + "/" + std::to_string(total) + "]");
    }
    for (const auto& note : answer.notes) feedback_.warning(answer.address + ": " + note);
  }

  void warning(const std::string& message) override { feedback_.warning(message); }

  void end() {
    clocks_.end();
    answers_.end();
    std::size_t failed = 0;
    std::string states;
    for (const auto& [state, count] : failed_) {
      failed += count;
      states += (states.empty() ? "" : ", ") + std::to_string(count) + " " +
                std::string(model::to_string(state));
    }
    if (failed > failures_said_) {
      feedback_.say(std::to_string(failed) + " of " + std::to_string(nodes_) +
                    " node(s) did not answer (" + states + "): the first " +
                    std::to_string(failures_said_) +
                    " are named above, every one in the report with its reason");
    }
  }

 private:
  const Feedback& feedback_;
  std::size_t nodes_;
  ProgressMeter::Task clocks_;
  ProgressMeter::Task answers_;
  std::size_t answered_before_ = 0;  // nodes that failed before the answers' phase
  bool answering_ = false;
  static constexpr std::size_t kFailuresSaid = 32;
  std::size_t failures_said_ = 0;
  std::map<model::NodeState, std::size_t> failed_;
};

// A node is late when it took sample 0 this long after the moment set for every node.
constexpr std::chrono::milliseconds kLateSample{100};

// When each node took sample 0, against the moment set for all (each node's clock offset
// applied): said in one line, and a warning when some were late.
void say_sample_times(const std::vector<agent::AgentAnswer>& answers,
                      const agent::FanoutTimes& times, const Feedback& feedback) {
  const std::int64_t start =
      std::chrono::duration_cast<std::chrono::nanoseconds>(times.start.time_since_epoch()).count();
  std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
  std::int64_t latest = std::numeric_limits<std::int64_t>::min();
  std::size_t sampled = 0, late = 0;
  const agent::AgentAnswer* latest_node = nullptr;
  for (const auto& answer : answers) {
    if (answer.status != model::NodeState::kOk || answer.snapshots.empty()) continue;
    const std::int64_t at =
        answer.snapshots.front().capture_unix_ns - answer.clock_offset_ns - start;
    ++sampled;
    earliest = std::min(earliest, at);
    if (at > latest) {
      latest = at;
      latest_node = &answer;
    }
    if (at > std::chrono::nanoseconds(kLateSample).count()) ++late;
  }
  if (sampled == 0) return;
  feedback.say("sample 0 of " + std::to_string(sampled) + " node(s) taken from " +
               ms_text(std::chrono::nanoseconds(earliest)) + " to " +
               ms_text(std::chrono::nanoseconds(latest)) +
               " after the moment set (clock offsets applied)");
  if (late > 0) {
    feedback.warning(std::to_string(late) + " node(s) took sample 0 more than " +
                     ms_text(kLateSample) + " after the moment set for every node (latest: " +
                     latest_node->address + ", " + ms_text(std::chrono::nanoseconds(latest)) +
                     "): their first interval is shorter than asked");
  }
}

}  // namespace

model::Bundle from_agents(const std::vector<std::string>& addresses,
                          const agent::CollectRequest& request, const Feedback& feedback) {
  feedback.say("asking " + std::to_string(addresses.size()) + " agent(s) for " +
               std::to_string(request.samples) + " sample(s)");
  agent::FanoutTimes times;
  Listener listener(feedback, addresses.size());
  auto answers = agent::collect_all(addresses, request, listener, &times);
  listener.end();
  say_sample_times(answers, times, feedback);
  // A node is the agent that answered: its snapshots take its name, and two agents giving one
  // name (one --node-name on two nodes) are named apart by their addresses.
  std::vector<model::NodeAnswer> nodes;
  nodes.reserve(answers.size());
  for (auto& answer : answers) {
    const std::string name = answer.node_name.empty() ? answer.address : answer.node_name;
    nodes.push_back({{name, answer.address, answer.status, answer.error, answer.clock_offset_ns},
                     answer.address,
                     std::move(answer.snapshots)});
  }
  return assemble(std::move(nodes), feedback);
}

}  // namespace hangscope::sources
