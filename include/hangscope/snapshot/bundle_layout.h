// The names of a bundle directory's files: what diagnose writes (report/) and what `report`
// and `diagnose -o DIR --force` read or remove (sources/, report/).
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace hangscope::snapshot {

// The files a bundle consists of, by name, beside kSnapshotsDir: all that write_bundle_data and
// write_reports write, and all that `diagnose -o DIR --force` may remove.
inline constexpr std::array<std::string_view, 6> kBundleFiles = {
    "nodes.json", "report.md", "report.json", "tree.dot", "tree.svg", "stacks.folded"};
inline constexpr std::string_view kSnapshotsDir = "snapshots";

// A snapshot file's name in snapshots/: NODE.json or NODE.pb, NODE of [A-Za-z0-9._-].
bool is_snapshot_file_name(std::string_view name);

// A temporary file of a snapshot file being replaced (".NAME.new-…").
bool is_new_file_of_snapshot(std::string_view name);

}  // namespace hangscope::snapshot
