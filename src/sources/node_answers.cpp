#include "node_answers.h"

namespace hangscope::sources {

model::Bundle assemble(std::vector<model::NodeAnswer> answers, const Feedback& feedback) {
  std::vector<std::string> renamed;
  auto bundle = model::assemble_bundle(std::move(answers), &renamed);
  for (const auto& note : renamed) feedback.say(note);
  return bundle;
}

}  // namespace hangscope::sources
