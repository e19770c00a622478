// Nodes' answers made into a bundle, the renamings said (private to sources/).
#pragma once

#include <vector>

#include "hangscope/model/bundle.h"
#include "hangscope/sources/sources.h"

namespace hangscope::sources {

// model::assemble_bundle, each node named apart from another of the same name said on `feedback`.
model::Bundle assemble(std::vector<model::NodeAnswer> answers, const Feedback& feedback);

}  // namespace hangscope::sources
