// Fuzz target: signature rule files (/etc/hangscope/rules.d/*.json, `--rules DIR`,
// `hangscope rules check FILE`). Feeds the text of one rule file to rules::parse_rule; a rule
// it accepts is then evaluated on the jobs of a fixed analysis (a store barrier with a rank
// waiting for a key, facts, environment, log lines, versions: the analysis tests' builders),
// so its regexes, facts and summary template run too, and applied with the built-in rules.
#include "analysis_builders.h"
#include "fuzz_support.h"
#include "hangscope/common/error.h"
#include "hangscope/diagnosis/diagnose.h"

namespace {

using namespace hangscope;
using namespace hangscope::analysis::testing_builders;

const model::Bundle& fixed_bundle() {
  static const model::Bundle bundle = [] {
    JobBuilder job(4);
    job.rank(0, barrier_stack())
        .rank(1, barrier_stack())
        .rank(2, store_wait_stack(2), 'S', 3)
        .rank(3, all_reduce_stack(), 'R', 40)
        .fact(2, "version.vllm", "0.9.1")
        .fact(2, "version.torch", "2.5.1+cu124")
        .fact(3, "shm.free_bytes", "0")
        .fact(3, "cache.flashinfer.autotune", "missing")
        .env(2, "VLLM_USE_V1", "1")
        .env(3, "NCCL_P2P_DISABLE", "0");
    return job.bundle();
  }();
  return bundle;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const analysis::Analysis base = diagnosis::diagnose(fixed_bundle());
  rules::Rule rule;
  try {
    rule = rules::parse_rule(fuzz::input(data, size), "fuzz.json");
  } catch (const Error&) {
    return 0;
  }
  for (const auto& job : base.jobs) (void)rules::evaluate(rule, job, base.others);
  // The whole pipeline with the built-in rules and this one (the same id replaces a built-in).
  rules::RuleSet set;
  set.rules = fuzz::builtin_rules();
  set.rules.push_back(std::move(rule));
  (void)diagnosis::diagnose(fixed_bundle(), set);
  return 0;
}
