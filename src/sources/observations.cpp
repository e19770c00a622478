#include "hangscope/sources/observations.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "hangscope/common/clock.h"
#include "hangscope/common/error.h"

namespace hangscope::sources {
namespace {

// Agents asked at once in one poll; each call lasts the window, so a poll of more agents than
// this takes longer than one window (docs/watch.md says so).
constexpr std::size_t kObserveWorkers = 64;

std::string hostname() {
  char buffer[256] = {};
  ::gethostname(buffer, sizeof buffer - 1);
  return buffer;
}

}  // namespace

Observations::Observations(const std::vector<std::string>& addresses,
                           const agent::CollectRequest& credentials, capture::ObserveOptions local)
    : local_options_(std::move(local)) {
  for (const auto& address : addresses) {
    observers_.push_back(std::make_unique<agent::AgentObserver>(address, credentials));
  }
  if (observers_.empty()) local_observer_ = std::make_unique<capture::NodeObserver>();
}

Observations::~Observations() = default;

model::Bundle Observations::poll(std::chrono::milliseconds window, int probes,
                                 const std::function<bool()>& stopping) {
  std::vector<agent::AgentAnswer> answers;
  if (local()) {
    agent::AgentAnswer answer;
    answer.address = "local";
    auto options = local_options_;
    options.window = window;
    options.probes = probes;
    try {
      const auto wait_until = [&](std::int64_t due) {
        for (std::int64_t left = due - unix_now_ns(); left > 0; left = due - unix_now_ns()) {
          if (stopping && stopping()) return false;
          std::this_thread::sleep_for(
              std::chrono::nanoseconds(std::min<std::int64_t>(left, 100'000'000)));
        }
        return !(stopping && stopping());
      };
      auto reads = local_observer_->observe(options, wait_until);
      if (reads) {
        answer.node_name = (*reads)[0].node_name;
        answer.snapshots = {std::move((*reads)[0]), std::move((*reads)[1])};
      }
    } catch (const Error& e) {
      answer.status = model::NodeState::kError;
      answer.error = e.what();
    }
    if (answer.node_name.empty())
      answer.node_name = local_options_.selection.node_name_or(hostname());
    answers.push_back(std::move(answer));
  } else {
    answers.resize(observers_.size());
    std::atomic<std::size_t> next{0};
    const auto work = [&] {
      for (std::size_t i = next++; i < observers_.size(); i = next++) {
        answers[i] = observers_[i]->observe(window, probes);
      }
    };
    std::vector<std::thread> workers;
    for (std::size_t w = 0; w < std::min(kObserveWorkers, observers_.size()); ++w) {
      workers.emplace_back(work);
    }
    for (auto& w : workers) w.join();
  }
  std::vector<model::NodeAnswer> nodes;
  for (auto& answer : answers) {
    const std::string name = answer.node_name.empty() ? answer.address : answer.node_name;
    model::NodeAnswer node{
        {name, local() ? std::nullopt : std::optional<std::string>(answer.address), answer.status,
         answer.error, answer.clock_offset_ns},
        answer.address,
        {}};
    if (answer.status == model::NodeState::kOk && answer.snapshots.size() == 2) {
      const auto before = previous_.find(answer.address);
      if (before != previous_.end()) node.samples.push_back(before->second);
      node.samples.push_back(answer.snapshots[0]);
      node.samples.push_back(answer.snapshots[1]);
      for (std::size_t i = 0; i < node.samples.size(); ++i) {
        node.samples[i].sample_index = static_cast<int>(i);
      }
      previous_[answer.address] = std::move(answer.snapshots[1]);
    } else {
      previous_.erase(answer.address);
      if (answer.status == model::NodeState::kOk) {
        node.status.status = model::NodeState::kError;
        node.status.error = "the agent's observation held " +
                            std::to_string(answer.snapshots.size()) + " reads, not 2";
      }
    }
    nodes.push_back(std::move(node));
  }
  return model::assemble_bundle(std::move(nodes));
}

}  // namespace hangscope::sources
