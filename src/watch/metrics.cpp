// Placeholder until the prometheus-cpp endpoint lands (branch watch-deploy): --metrics is
// refused with a clear message.
#include "hangscope/watch/metrics.h"

#include "hangscope/common/error.h"

namespace hangscope::watch {

struct Metrics::State {};

void check_metrics_options(const MetricsOptions&) {
  throw Error("the metrics endpoint is not built into this binary yet");
}
Metrics::Metrics(const MetricsOptions& options) {
  check_metrics_options(options);
}
Metrics::~Metrics() = default;
int Metrics::port() const {
  return 0;
}
void Metrics::set_jobs(const std::vector<JobReading>&) {}
void Metrics::count_incident(std::string_view) {}
void Metrics::count_cleared() {}
void Metrics::set_nodes(const std::map<std::string, bool>&) {}
void Metrics::polled(std::int64_t, double) {}
void Metrics::captured(double) {}

}  // namespace hangscope::watch
