// Where verdicts are made. Each stage names the file that implements it.
#include "hangscope/diagnosis/diagnose.h"

#include <algorithm>
#include <map>

#include "hangscope/analysis/postmortem.h"
#include "hangscope/analysis/verdict_ids.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/rules/engine.h"

namespace hangscope::diagnosis {

void order_verdicts(std::vector<analysis::Verdict>& verdicts) {
  std::stable_sort(verdicts.begin(), verdicts.end(),
                   [](const analysis::Verdict& a, const analysis::Verdict& b) {
                     const bool sa = a.kind == analysis::VerdictKind::kSignature;
                     const bool sb = b.kind == analysis::VerdictKind::kSignature;
                     if (sa != sb) return sa;
                     return a.confidence > b.confidence;
                   });
}

analysis::Analysis diagnose(const model::Bundle& bundle, const rules::RuleSet& rules) {
  using analysis::Verdict;
  PhaseTimer timer("analysis, ");
  analysis::Analysis result;

  // 1. The rank table and its links (analysis/rank_table.cpp, wait_graph.cpp, connectivity.cpp).
  //    What cannot all be true (a negative rank, two processes of one rank, …) is named in
  //    result.diagnostics; the rank table keeps the rest.
  result.jobs = analysis::build_jobs(bundle, &result.diagnostics);
  timer.lap("rank table");
  //    A job known from flight-recorder dumps alone (post-mortem, sources/flight_records.cpp)
  //    has no stacks: no wait points, classes or TCP peers to derive.
  std::vector<bool> post_mortem;
  for (const auto& job : result.jobs) post_mortem.push_back(analysis::flight_records_only(job));
  const auto each_live_job = [&](void (*stage)(analysis::Job&)) {
    for (std::size_t j = 0; j < result.jobs.size(); ++j) {
      if (!post_mortem[j]) stage(result.jobs[j]);
    }
  };
  each_live_job(analysis::link_wait_graph);
  timer.lap("wait-for graph");
  each_live_job(analysis::assign_classes);
  timer.lap("classes");
  each_live_job(analysis::link_tcp_peers);
  timer.lap("TCP peers");
  result.others = analysis::other_processes(bundle);

  // 2. Verdicts, source by source.
  //    Nodes that did not answer (analysis/verdicts.cpp).
  auto& verdicts = result.verdicts;
  verdicts = analysis::node_verdicts(result.jobs, bundle.nodes);
  //    Flight records: a rank behind, mismatched collectives (analysis/collective_sequences.cpp);
  //    post-mortem, by each group's consensus, also ranks ahead, missing dumps and a stalled
  //    transport (analysis/flight_consensus.cpp), and nothing else to judge by.
  for (std::size_t j = 0; j < result.jobs.size(); ++j) {
    if (result.jobs[j].group) continue;  // flight records number a torch job's ranks
    auto recorded = post_mortem[j] ? analysis::postmortem_flight_verdicts(result.jobs[j])
                                   : analysis::correlate_flight_records(result.jobs[j]);
    verdicts.insert(verdicts.end(), recorded.begin(), recorded.end());
  }
  for (std::size_t j = 0; j < result.jobs.size(); ++j) {
    if (post_mortem[j]) continue;
    auto& job = result.jobs[j];
    //  A job hung at init: the absent ranks are the verdict (analysis/init_hang.cpp); the graph
    //  of ranks that hold no group yet would only name the waiting.
    std::map<int, const analysis::OtherProcess*> found;
    if (auto init = job.group ? std::nullopt : analysis::init_verdict(job, result.others, &found)) {
      verdicts.push_back(std::move(*init));
      analysis::place_absent_ranks(job, found);
      continue;
    }
    //  The wait-for graph: diverged, dead, stopped, straggling ranks, cycles resolved by
    //  program order (analysis/verdicts.cpp).
    auto generic = analysis::generic_verdicts(job);
    verdicts.insert(verdicts.end(), generic.begin(), generic.end());
  }
  //    The serving chain (analysis/serving_chain.cpp): API servers → engine cores → the
  //    workers' job; its front-end verdict names the rank where the workers' graph ends, ahead
  //    of the verdicts about that rank alone (inserted first: at equal confidence it leads).
  result.serving = analysis::serving_chains(bundle, result.jobs, result.others);
  auto serving = analysis::serving_verdicts(result.serving, result.jobs, verdicts);
  verdicts.insert(verdicts.begin(), serving.begin(), serving.end());
  timer.lap("verdicts");
  for (auto& v : verdicts) analysis::add_evidence(result.jobs, v);
  timer.lap("evidence");
  //    Known bugs: the signature rules (rules/engine.cpp), which mark the generic verdicts they
  //    explain.
  auto signatures = rules::signature_verdicts(rules.rules, result.jobs, result.others, verdicts);
  //    A known bug that explains the rank where a serving chain ends explains the chain's
  //    verdict too: it is that rank's symptom at the front.
  for (auto& v : verdicts) {
    if (v.id != analysis::verdict_ids::kServingStalled || !v.explained_by.empty()) continue;
    for (const auto& g : verdicts) {
      if (!g.explained_by.empty() && g.job == v.job &&
          g.diverged_ranks.intersects(v.diverged_ranks)) {
        v.explained_by = g.explained_by;
        break;
      }
    }
  }
  verdicts.insert(verdicts.begin(), signatures.begin(), signatures.end());
  timer.lap("signature rules");

  // 3. The processes each verdict names; a verdict on a group outside the registry that
  //    repeats one on a torch job is dropped, one that links jobs leads (verdict_processes.cpp).
  for (auto& v : verdicts) analysis::name_processes(result, v);
  analysis::merge_group_verdicts(result.jobs, verdicts);
  // 4. Order and conclusion: a signature verdict first, then by confidence.
  order_verdicts(verdicts);
  analysis::measure_samples(bundle, result);
  const bool all_post_mortem =
      !post_mortem.empty() &&
      std::all_of(post_mortem.begin(), post_mortem.end(), [](bool p) { return p; });
  result.conclusion = !verdicts.empty() ? verdicts.front().summary
                      : all_post_mortem ? analysis::postmortem_no_divergence(result.jobs)
                                        : analysis::no_divergence(result.jobs, result.samples) +
                                              analysis::serving_note(result.serving);
  return result;
}

}  // namespace hangscope::diagnosis
