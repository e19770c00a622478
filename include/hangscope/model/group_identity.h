// How one process group is known across processes: by the TCPStore it was made on, at its
// resolved address (a host name differs per node; a loopback address names the node's own
// store), and the PrefixStore prefixes in between (docs/analysis.md, "Groups outside the
// registry").
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/model/bundle.h"
#include "hangscope/model/connections.h"
#include "hangscope/model/node_snapshot.h"
#include "hangscope/model/process_dump.h"

namespace hangscope::model {

// The nodes' addresses (from the processes' net.interfaces facts; loopback left out): which
// node an address a process connected to belongs to.
using AddressBook = std::map<std::string, std::string>;  // address → node
AddressBook address_book(const Bundle& bundle);

// "node1:29550/tcp://10.0.0.1:29550": the node that serves the store (its address resolved by
// `book`; a loopback or unspecified address is the process's own node; a host name is
// resolved by the process's own connection on the store's port, from its net.tcp fact), the
// port, then each prefix after a '/'. An address of no known node stays an address.
// "" when the store is not known, or is process-local (HashStore).
std::string group_store_key(const ProcessGroupState& group, std::string_view node,
                            const ProcessRecord& process, const AddressBook& book);

}  // namespace hangscope::model
