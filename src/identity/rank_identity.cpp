#include "hangscope/identity/rank_identity.h"

#include <re2/re2.h>

#include <memory>
#include <string>
#include <vector>

#include "hangscope/common/numbers.h"
#include "hangscope/waits/frameworks.h"

namespace hangscope::identity {

using model::RankIdentity;
namespace {

// The name a field's source is shown by (RankIdentity::sources).
std::string source_name(model::IdentitySource source) {
  return std::string(model::to_string(source));
}

std::string env_source_name(bool env_from_memory) {
  return source_name(env_from_memory ? model::IdentitySource::kMemoryEnv
                                     : model::IdentitySource::kEnv);
}

std::optional<int> env_int(const std::map<std::string, std::string>& env, std::string_view name) {
  const auto it = env.find(std::string(name));
  return it == env.end() ? std::nullopt : to_int(it->second);
}

// A variable's value; "" when it is unset.
std::string env_text(const std::map<std::string, std::string>& env, std::string_view name) {
  const auto it = env.find(std::string(name));
  return it == env.end() ? std::string() : it->second;
}

// Reads "_DP0_PP1_TP3_EP2"-style suffixes into info; false on anything else.
bool parse_parallel_suffix(std::string_view rest, TitleInfo& info) {
  while (!rest.empty()) {
    if (rest.front() != '_') return false;
    rest.remove_prefix(1);
    const auto next = rest.find('_');
    const std::string_view part = rest.substr(0, next);
    rest.remove_prefix(next == std::string_view::npos ? rest.size() : next);
    if (part.size() < 3) return false;
    const auto value = to_int(part.substr(2));
    if (!value) return false;
    const std::string_view kind = part.substr(0, 2);
    if (kind == "TP")
      info.tp = value;
    else if (kind == "PP")
      info.pp = value;
    else if (kind == "DP")
      info.dp = value;
    else if (kind == "EP")
      info.ep = value;
    else
      return false;
  }
  return true;
}

}  // namespace

namespace {

// The name after the framework's marker in `title`; nullopt when the title does not carry the
// marker where the framework puts it.
std::optional<std::string_view> name_after_marker(std::string_view title,
                                                  const waits::ProcessTitle& pattern) {
  if (pattern.after_prefix) {
    const auto at = title.find(pattern.marker);
    if (at == std::string_view::npos) return std::nullopt;
    return title.substr(at + pattern.marker.size());
  }
  if (title.substr(0, pattern.marker.size()) != pattern.marker) return std::nullopt;
  return title.substr(pattern.marker.size());
}

bool title_name_matches(std::string_view name, const waits::TitleName& entry) {
  switch (entry.match) {
    case waits::TitleName::Match::kWord:
      return name.substr(0, name.find('_')) == entry.text;
    case waits::TitleName::Match::kContains:
      return name.find(entry.text) != std::string_view::npos;
    case waits::TitleName::Match::kAny:
      return true;
  }
  return false;
}

// Reads the parallel ranks `entry` says the name carries; false when a suffix it must carry
// does not read.
bool read_title_ranks(std::string_view name, const waits::TitleName& entry, TitleInfo& info) {
  switch (entry.ranks) {
    case waits::TitleRanks::kNone:
      return true;
    case waits::TitleRanks::kSuffix: {
      const auto underscore = name.find('_');
      return parse_parallel_suffix(
          underscore == std::string_view::npos ? std::string_view() : name.substr(underscore),
          info);
    }
    case waits::TitleRanks::kFromTp:
      if (const auto tp = name.find("_TP"); tp != std::string_view::npos) {
        parse_parallel_suffix(name.substr(tp), info);
      }
      return true;
  }
  return false;
}

// What the name after a framework's marker says: the first of its title names that matches.
std::optional<TitleInfo> read_title_name(const waits::FrameworkTable& framework,
                                         std::string_view name) {
  for (const auto& entry : framework.title->names) {
    if (!title_name_matches(name, entry)) continue;
    TitleInfo info;
    info.framework = std::string(framework.name);
    info.role = entry.role;
    if (!read_title_ranks(name, entry, info)) return std::nullopt;
    return info;
  }
  return std::nullopt;
}

// The key the variables name; "" when a required one is unset.
std::string key_from_variables(const std::map<std::string, std::string>& env,
                               const waits::JobVariables& variables) {
  std::string key(variables.prefix);
  std::string_view separator;
  for (const auto name : variables.required) {
    const std::string value = env_text(env, name);
    if (value.empty()) return "";
    key.append(separator).append(value);
    separator = ":";
  }
  for (const auto name : variables.optional) {
    key.append(separator).append(env_text(env, name));
    separator = ":";
  }
  return key;
}

// Rank, local rank and world size from a launcher's variables; false when they name no rank.
bool identify_from_rank_variables(const std::map<std::string, std::string>& env,
                                  const waits::RankVariables& names, bool env_from_memory,
                                  RankIdentity& id) {
  // torchrun / env:// launches name the global rank; the title adds the parallel grid.
  if (const auto rank = env_int(env, names.rank)) {
    id.rank = rank;
    id.local_rank = env_int(env, names.local_rank);
    id.world_size = env_int(env, names.world_size);
    if (id.role == model::ProcessRole::kUnidentified) id.role = model::ProcessRole::kRank;
    id.source = env_from_memory ? model::IdentitySource::kMemoryEnv : model::IdentitySource::kEnv;
    const std::string source(model::to_string(id.source));
    id.sources["rank"] = source;
    if (id.local_rank) id.sources["local_rank"] = source;
    if (id.world_size) id.sources["world_size"] = source;
    return true;
  }
  if (const auto local = env_int(env, names.local_rank);
      local && id.role == model::ProcessRole::kRank) {
    id.local_rank = local;  // Ray v1 workers: LOCAL_RANK only
    id.sources["local_rank"] = env_source_name(env_from_memory);
    return true;
  }
  return false;
}

// The identity's field of a parallel dimension ("tp", "pp", "dp"); nullptr for another.
std::optional<int>* coordinate_field(RankIdentity& id, std::string_view dimension) {
  if (dimension == "tp") return &id.tp;
  if (dimension == "pp") return &id.pp;
  if (dimension == "dp") return &id.dp;
  return nullptr;
}

}  // namespace

std::optional<TitleInfo> parse_title(std::string_view title) {
  // Titles may carry a prefix (VLLM_PROCESS_NAME_PREFIX) and trailing arguments.
  if (const auto space = title.find(' '); space != std::string_view::npos)
    title = title.substr(0, space);
  // The first framework whose marker the title carries says what it is, or nothing.
  for (const auto* framework : waits::frameworks()) {
    if (!framework->title) continue;
    if (const auto name = name_after_marker(title, *framework->title)) {
      return read_title_name(*framework, *name);
    }
  }
  return std::nullopt;
}

std::string job_key(const std::map<std::string, std::string>& env) {
  for (const auto* framework : waits::frameworks()) {
    if (!framework->job_variables) continue;
    if (auto key = key_from_variables(env, *framework->job_variables); !key.empty()) return key;
  }
  return "";
}

RankIdentity identify(const std::map<std::string, std::string>& env, bool env_from_memory,
                      std::string_view title) {
  RankIdentity id;
  id.job = job_key(env);
  const auto title_info = parse_title(title);
  if (title_info) {
    id.title = std::string(title.substr(0, title.find(' ')));
    id.role = title_info->role;
    id.tp = title_info->tp;
    id.pp = title_info->pp;
    id.dp = title_info->dp;
    id.source = model::IdentitySource::kTitle;
    for (const auto& [field, value] : {std::pair{"tp", id.tp}, {"pp", id.pp}, {"dp", id.dp}}) {
      if (value) id.sources[field] = source_name(model::IdentitySource::kTitle);
    }
  }
  for (const auto* framework : waits::frameworks()) {
    if (framework->rank_variables &&
        identify_from_rank_variables(env, *framework->rank_variables, env_from_memory, id)) {
      break;
    }
  }
  // A framework's variables for the coordinates the title did not give (VLLM_DP_RANK).
  for (const auto* framework : waits::frameworks()) {
    for (const auto& variable : framework->coordinate_variables) {
      auto* field = coordinate_field(id, variable.dimension);
      if (field == nullptr || *field) continue;
      *field = env_int(env, variable.name);
      if (*field) id.sources[std::string(variable.dimension)] = env_source_name(env_from_memory);
    }
  }
  return id;
}

namespace {

// A framework's coordinate log line, compiled once.
struct CompiledLogLine {
  std::unique_ptr<RE2> pattern;
  std::vector<std::string_view> dimensions;
};

const std::vector<CompiledLogLine>& coordinate_log_lines() {
  static const auto compiled = [] {
    std::vector<CompiledLogLine> out;
    for (const auto* framework : waits::frameworks()) {
      for (const auto& line : framework->coordinate_log_lines) {
        auto pattern = std::make_unique<RE2>(line.pattern);
        // The groups are the rank and one per dimension; a table that says otherwise is skipped.
        if (!pattern->ok() ||
            pattern->NumberOfCapturingGroups() != static_cast<int>(line.dimensions.size()) + 1) {
          continue;
        }
        out.push_back({std::move(pattern), line.dimensions});
      }
    }
    return out;
  }();
  return compiled;
}

// A framework's start-up line giving the coordinates (vLLM's initialize_model_parallel: "rank 3
// in world size 4 is assigned as DP rank 0, PP rank 1, TP rank 1") fills those the environment
// did not; the newest line of this rank decides.
void coordinates_from_log(const std::vector<std::string>& lines, RankIdentity& identity) {
  const auto& known = coordinate_log_lines();
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    // A log line is any text the rank printed: a long one is no start-up line.
    if (it->size() > 4096) continue;
    for (const auto& line : known) {
      const std::size_t groups = line.dimensions.size() + 1;
      std::vector<std::string> values(groups);
      std::vector<RE2::Arg> args(groups);
      std::vector<const RE2::Arg*> arg_pointers(groups);
      for (std::size_t i = 0; i < groups; ++i) {
        args[i] = &values[i];
        arg_pointers[i] = &args[i];
      }
      if (!RE2::PartialMatchN(*it, *line.pattern, arg_pointers.data(), static_cast<int>(groups))) {
        continue;
      }
      // Numbers that do not fit an int (to_int: nullopt) are no ranks.
      if (identity.rank && identity.rank != to_int(values[0])) continue;  // another rank's line
      for (std::size_t d = 0; d < line.dimensions.size(); ++d) {
        auto* field = coordinate_field(identity, line.dimensions[d]);
        if (field == nullptr || *field) continue;
        *field = to_int(values[d + 1]);
        if (*field) {
          identity.sources[std::string(line.dimensions[d])] =
              source_name(model::IdentitySource::kLog);
        }
      }
      return;
    }
  }
}

}  // namespace

void identify_from_log(const std::vector<std::string>& lines, RankIdentity& identity) {
  coordinates_from_log(lines, identity);
  if (identity.rank) return;  // the environment is the authority when it speaks
  const auto value_after = [](std::string_view line, std::string_view key) -> std::optional<int> {
    std::size_t at = 0;
    while ((at = line.find(key, at)) != std::string_view::npos) {
      // A whole word: "rank=" must not match inside "local_rank=".
      if (at == 0 || line[at - 1] == ' ' || line[at - 1] == ')') {
        std::string_view rest = line.substr(at + key.size());
        rest = rest.substr(0, rest.find_first_of(" ,"));
        return to_int(rest);
      }
      at += key.size();
    }
    return std::nullopt;
  };
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    const auto world = value_after(*it, "world_size=");
    const auto rank = value_after(*it, "rank=");
    if (!world || !rank) continue;
    identity.world_size = world;
    identity.rank = rank;
    identity.local_rank = value_after(*it, "local_rank=");
    if (identity.role == model::ProcessRole::kUnidentified)
      identity.role = model::ProcessRole::kRank;
    identity.source = model::IdentitySource::kLog;
    const std::string log = source_name(model::IdentitySource::kLog);
    identity.sources["rank"] = identity.sources["world_size"] = log;
    if (identity.local_rank) identity.sources["local_rank"] = log;
    return;
  }
}

void identify_from_own_logs(const std::vector<ProcessLogs>& processes) {
  std::map<std::string, int> writers;
  for (const auto& p : processes) {
    for (const auto& log : *p.logs) ++writers[log.path];
  }
  for (const auto& p : processes) {
    std::vector<std::string> own, shared;
    for (const auto& log : *p.logs) {
      auto& lines = writers[log.path] == 1 ? own : shared;
      lines.insert(lines.end(), log.lines.begin(), log.lines.end());
    }
    identify_from_log(own, *p.identity);
    // A log several processes write (a launcher's inherited stdout): its "world_size= rank="
    // lines identify nobody, but vLLM's assignment lines name their rank, so a process whose
    // rank is known still takes its dp/pp/tp from them.
    if (p.identity->rank) coordinates_from_log(shared, *p.identity);
  }
}

}  // namespace hangscope::identity
