// The agents' source: every node's agent asked for its samples, at most 128 at once.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "hangscope/sources/sources.h"
#include "node_answers.h"

namespace hangscope::sources {

model::Bundle from_agents(const std::vector<std::string>& addresses,
                          const agent::CollectRequest& request, const Feedback& feedback) {
  feedback.say("asking " + std::to_string(addresses.size()) + " agent(s) for " +
               std::to_string(request.samples) + " sample(s)");
  // A fixed pool of workers takes the agents one by one: at most kWorkers are asked at once,
  // and a slow agent holds up only its own worker.
  constexpr std::size_t kWorkers = 128;
  std::vector<agent::AgentAnswer> answers(addresses.size());
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  auto waiting = feedback.start("waiting for the agents' answers", "", addresses.size());
  std::mutex say;
  const auto work = [&] {
    for (std::size_t i = next++; i < addresses.size(); i = next++) {
      answers[i] = agent::collect_from(addresses[i], request);
      const auto& answer = answers[i];
      const auto finished = ++done;
      waiting.add_done(1);
      if (answer.status != model::NodeState::kOk || addresses.size() <= 16 || finished % 256 == 0 ||
          finished == addresses.size()) {
        std::lock_guard<std::mutex> lock(say);
        feedback.say(answer.address + ": " + std::string(model::to_string(answer.status)) +
                     (answer.error.empty() ? "" : " (" + answer.error + ")") + " [" +
                     std::to_string(finished) + "/" + std::to_string(addresses.size()) + "]");
      }
      for (const auto& note : answer.notes) {
        std::lock_guard<std::mutex> lock(say);
        feedback.warning(answer.address + ": " + note);
      }
    }
  };
  std::vector<std::thread> workers;
  for (std::size_t w = 0; w < std::min(kWorkers, addresses.size()); ++w) workers.emplace_back(work);
  for (auto& w : workers) w.join();
  waiting.end();
  // A node is the agent that answered: its snapshots take its name, and two agents giving one
  // name (one --node-name on two nodes) are named apart by their addresses.
  std::vector<model::NodeAnswer> nodes;
  for (auto& answer : answers) {
    const std::string name = answer.node_name.empty() ? answer.address : answer.node_name;
    nodes.push_back({{name, answer.address, answer.status, answer.error, answer.clock_offset_ns},
                     answer.address,
                     std::move(answer.snapshots)});
  }
  return assemble(std::move(nodes), feedback);
}

}  // namespace hangscope::sources
