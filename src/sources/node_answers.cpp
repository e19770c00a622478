#include "node_answers.h"

#include "hangscope/waits/serving_roles.h"

namespace hangscope::sources {

model::Bundle assemble(std::vector<model::NodeAnswer> answers, const Feedback& feedback) {
  std::vector<std::string> renamed;
  auto bundle = model::assemble_bundle(std::move(answers), &renamed);
  for (const auto& note : renamed) feedback.say(note);
  settle_serving_roles(bundle);
  return bundle;
}

void settle_serving_roles(model::Bundle& bundle) {
  for (auto& sample : bundle.snapshots) waits::assign_serving_roles(sample.processes);
}

}  // namespace hangscope::sources
