// The non-stopping observations `hangscope watch` polls (docs/watch.md): every agent's Observe
// call, or this node's capture::NodeObserver in-process. Each poll is a bundle in which every
// node that answered has its previous poll's last read (when it answered then too), then this
// poll's first and last reads, as samples 0, 1, 2: a rank present before and gone now is a rank
// that exited, one whose stack stood still across them waits.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hangscope/agent/agent.h"
#include "hangscope/capture/node_observer.h"
#include "hangscope/model/bundle.h"

namespace hangscope::sources {

class Observations {
 public:
  // The agents at `addresses` (token and TLS from `credentials`), or this node when there are
  // none (`local`: its --pid, --select and node name).
  Observations(const std::vector<std::string>& addresses, const agent::CollectRequest& credentials,
               capture::ObserveOptions local);
  ~Observations();
  Observations(const Observations&) = delete;
  Observations& operator=(const Observations&) = delete;

  // One poll: every node observed for `window` with `probes` reads in it, concurrently. A node
  // that does not answer is a node of the bundle in its state (unreachable, refused, …) with
  // no samples, and its previous read is forgotten.
  // `stopping` (optional) is asked while this node's own observation waits: true ends it early
  // (the poll then has no samples of this node).
  model::Bundle poll(std::chrono::milliseconds window, int probes,
                     const std::function<bool()>& stopping = {});

  bool local() const { return observers_.empty(); }
  std::size_t nodes() const { return local() ? 1 : observers_.size(); }

 private:
  std::vector<std::unique_ptr<agent::AgentObserver>> observers_;
  capture::ObserveOptions local_options_;
  std::unique_ptr<capture::NodeObserver> local_observer_;
  std::map<std::string, model::NodeSnapshot> previous_;  // by source: the last read it gave
};

}  // namespace hangscope::sources
