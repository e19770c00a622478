// Nodes' answers made into a bundle, the renamings said (private to sources/).
#pragma once

#include <vector>

#include "hangscope/model/bundle.h"
#include "hangscope/sources/sources.h"

namespace hangscope::sources {

// model::assemble_bundle, each node named apart from another of the same name said on `feedback`.
model::Bundle assemble(std::vector<model::NodeAnswer> answers, const Feedback& feedback);

// Snapshots written before roles were decided at capture (and cores) get the serving roles
// their records say (waits/serving_roles.h): an engine core recorded as a launcher is the engine
// core. Records that have theirs keep them.
void settle_serving_roles(model::Bundle& bundle);

}  // namespace hangscope::sources
