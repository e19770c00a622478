// The watcher's Prometheus endpoint (watch/metrics.h) over real HTTP on 127.0.0.1: every metric
// of docs/watch.md from the start, jobs and nodes replaced as a whole, counters, label values
// from outside made valid and bounded, basic auth with the token, a scrape that never sees half
// an update, server threads that never take the watcher's signals, and the options refused
// before anything listens.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hangscope/common/error.h"
#include "hangscope/watch/metrics.h"

namespace hangscope::watch {
namespace {

const std::string kToken = "0123456789abcdef0123456789abcdef";

std::string base64(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned n = static_cast<unsigned char>(bytes[i]) << 16 |
                       static_cast<unsigned char>(bytes[i + 1]) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift = 18; shift >= 0; shift -= 6) out += alphabet[(n >> shift) & 63];
  }
  if (i < bytes.size()) {
    unsigned n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? alphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

struct Response {
  int status = 0;
  std::string body;
};

// GET `path` from 127.0.0.1:port over a plain socket (HTTP/1.1, Connection: close).
Response get(int port, const std::string& path = "/metrics",
             const std::optional<std::string>& credentials = std::nullopt) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    ADD_FAILURE() << "connect to port " << port << ": " << errno;
    ::close(fd);
    return {};
  }
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (credentials) request += "Authorization: Basic " + base64(*credentials) + "\r\n";
  request += "\r\n";
  EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) raw.append(buffer, n);
  ::close(fd);
  Response response;
  if (raw.rfind("HTTP/1.1 ", 0) == 0) response.status = std::stoi(raw.substr(9, 3));
  const auto body = raw.find("\r\n\r\n");
  if (body != std::string::npos) response.body = raw.substr(body + 4);
  return response;
}

// The value of the sample `series` (name with its labels, as the text format writes it), or
// nullopt when the scrape has no such sample.
std::optional<double> sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

template <typename Call>
std::string refusal(Call call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

MetricsOptions loopback() {
  MetricsOptions options;
  options.endpoint = "127.0.0.1:0";
  return options;
}

TEST(WatchMetrics, ServesEveryMetricFromTheStart) {
  Metrics metrics(loopback());
  ASSERT_GT(metrics.port(), 0);
  EXPECT_EQ(metrics.endpoint(), "127.0.0.1:" + std::to_string(metrics.port()));
  const Response response = get(metrics.port());
  ASSERT_EQ(response.status, 200) << response.body;
  for (const auto& [name, type] :
       std::map<std::string, std::string>{{"hangscope_watch_job_seconds_since_progress", "gauge"},
                                          {"hangscope_watch_job_ranks_waiting", "gauge"},
                                          {"hangscope_watch_job_ranks_progressing", "gauge"},
                                          {"hangscope_watch_jobs", "gauge"},
                                          {"hangscope_watch_incidents_total", "counter"},
                                          {"hangscope_watch_suspicions_cleared_total", "counter"},
                                          {"hangscope_watch_captures_total", "counter"},
                                          {"hangscope_watch_capture_seconds", "gauge"},
                                          {"hangscope_watch_node_unreachable", "gauge"},
                                          {"hangscope_watch_nodes_unreachable", "gauge"},
                                          {"hangscope_watch_last_poll_timestamp_seconds", "gauge"},
                                          {"hangscope_watch_poll_seconds", "gauge"},
                                          {"hangscope_watch_polls_total", "counter"}}) {
    EXPECT_NE(response.body.find("# TYPE " + name + " " + type + "\n"), std::string::npos)
        << name << " " << type << " in:\n"
        << response.body;
  }
  EXPECT_EQ(sample(response.body, "hangscope_watch_incidents_total{kind=\"hang\"}"), 0);
  EXPECT_EQ(sample(response.body, "hangscope_watch_incidents_total{kind=\"rank-dead\"}"), 0);
  EXPECT_EQ(sample(response.body, "hangscope_watch_jobs"), 0);
  EXPECT_EQ(sample(response.body, "hangscope_watch_nodes_unreachable"), 0);
  EXPECT_EQ(sample(response.body, "hangscope_watch_last_poll_timestamp_seconds"), 0);
  EXPECT_EQ(sample(response.body, "hangscope_watch_polls_total"), 0);
  EXPECT_EQ(get(metrics.port(), "/").status, 404);
}

TEST(WatchMetrics, JobsNodesAndCountersAsSet) {
  Metrics metrics(loopback());
  metrics.set_jobs({{"job-a", 12.5, 3, 1}, {"job-b", 0, 0, 4}});
  metrics.set_nodes({{"node0", false}, {"node1", true}, {"node2", true}});
  metrics.count_incident("hang");
  metrics.count_incident("hang");
  metrics.count_incident("rank-dead");
  metrics.count_cleared();
  metrics.polled(1'700'000'000'500'000'000, 0.25);
  metrics.polled(1'700'000'002'500'000'000, 0.125);
  metrics.captured(3.5);
  std::string text = get(metrics.port()).body;
  EXPECT_EQ(sample(text, "hangscope_watch_job_seconds_since_progress{job=\"job-a\"}"), 12.5);
  EXPECT_EQ(sample(text, "hangscope_watch_job_ranks_waiting{job=\"job-a\"}"), 3);
  EXPECT_EQ(sample(text, "hangscope_watch_job_ranks_progressing{job=\"job-a\"}"), 1);
  EXPECT_EQ(sample(text, "hangscope_watch_job_ranks_progressing{job=\"job-b\"}"), 4);
  EXPECT_EQ(sample(text, "hangscope_watch_jobs"), 2);
  EXPECT_EQ(sample(text, "hangscope_watch_node_unreachable{node=\"node0\"}"), 0);
  EXPECT_EQ(sample(text, "hangscope_watch_node_unreachable{node=\"node1\"}"), 1);
  EXPECT_EQ(sample(text, "hangscope_watch_nodes_unreachable"), 2);
  EXPECT_EQ(sample(text, "hangscope_watch_incidents_total{kind=\"hang\"}"), 2);
  EXPECT_EQ(sample(text, "hangscope_watch_incidents_total{kind=\"rank-dead\"}"), 1);
  EXPECT_EQ(sample(text, "hangscope_watch_suspicions_cleared_total"), 1);
  EXPECT_EQ(sample(text, "hangscope_watch_captures_total"), 1);
  EXPECT_EQ(sample(text, "hangscope_watch_capture_seconds"), 3.5);
  EXPECT_EQ(sample(text, "hangscope_watch_last_poll_timestamp_seconds"), 1700000002.5);
  EXPECT_EQ(sample(text, "hangscope_watch_poll_seconds"), 0.125);
  EXPECT_EQ(sample(text, "hangscope_watch_polls_total"), 2);

  // Replaced as a whole: a job or node not given any more is gone.
  metrics.set_jobs({{"job-b", 7, 1, 3}});
  metrics.set_nodes({{"node1", false}});
  text = get(metrics.port()).body;
  EXPECT_EQ(sample(text, "hangscope_watch_job_seconds_since_progress{job=\"job-a\"}"),
            std::nullopt);
  EXPECT_EQ(text.find("job-a"), std::string::npos) << text;
  EXPECT_EQ(sample(text, "hangscope_watch_job_seconds_since_progress{job=\"job-b\"}"), 7);
  EXPECT_EQ(sample(text, "hangscope_watch_jobs"), 1);
  EXPECT_EQ(sample(text, "hangscope_watch_node_unreachable{node=\"node2\"}"), std::nullopt);
  EXPECT_EQ(sample(text, "hangscope_watch_node_unreachable{node=\"node1\"}"), 0);
  EXPECT_EQ(sample(text, "hangscope_watch_nodes_unreachable"), 0);
  metrics.set_jobs({});
  text = get(metrics.port()).body;
  EXPECT_EQ(sample(text, "hangscope_watch_jobs"), 0);
  EXPECT_EQ(text.find("job-b"), std::string::npos) << text;
}

TEST(WatchMetrics, LabelValuesAreValidUtf8AndBounded) {
  EXPECT_EQ(metrics_label_value("vllm-0:127.0.0.1:29500"), "vllm-0:127.0.0.1:29500");
  EXPECT_EQ(metrics_label_value("a\xff"
                                "b"),
            "a\xef\xbf\xbd"
            "b");  // U+FFFD
  const std::string long_a(300, 'a');
  const std::string value = metrics_label_value(long_a);
  EXPECT_LE(value.size(), kMaxLabelBytes);
  EXPECT_EQ(value.substr(0, 100), long_a.substr(0, 100));
  EXPECT_EQ(value[value.size() - 9], '~') << value;
  EXPECT_NE(metrics_label_value(long_a + "x"), value) << "long keys sharing their start";
  // Cut at a character boundary: 200 two-byte characters stay valid UTF-8.
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "\xc3\xa9";
  const std::string cut = metrics_label_value(accents);
  EXPECT_LE(cut.size(), kMaxLabelBytes);
  EXPECT_EQ(metrics_label_value(cut), cut) << "already valid and short: unchanged";
  EXPECT_EQ(cut.find("\xef\xbf\xbd"), std::string::npos) << "no character cut in half";

  // Through the endpoint: quotes, backslashes and newlines escaped by the text format; keys
  // that come out equal kept apart.
  Metrics metrics(loopback());
  metrics.set_jobs({{"a\"b\\c\nd", 1, 1, 0}, {"x\xff", 2, 0, 0}, {"x\xfe", 3, 0, 0}});
  metrics.set_nodes({{std::string(300, 'n'), true}});
  metrics.count_incident("strange\xff");
  const std::string text = get(metrics.port()).body;
  EXPECT_EQ(sample(text, "hangscope_watch_job_ranks_waiting{job=\"a\\\"b\\\\c\\nd\"}"), 1) << text;
  EXPECT_EQ(sample(text, "hangscope_watch_job_seconds_since_progress{job=\"x\xef\xbf\xbd\"}"), 2)
      << text;
  EXPECT_EQ(sample(text, "hangscope_watch_job_seconds_since_progress{job=\"x\xef\xbf\xbd~2\"}"), 3)
      << text;
  EXPECT_EQ(sample(text, "hangscope_watch_jobs"), 3);
  EXPECT_EQ(sample(text, "hangscope_watch_node_unreachable{node=\"" +
                             metrics_label_value(std::string(300, 'n')) + "\"}"),
            1);
  EXPECT_EQ(sample(text, "hangscope_watch_incidents_total{kind=\"strange\xef\xbf\xbd\"}"), 1);
}

TEST(WatchMetrics, TheTokenIsTheBasicAuthPassword) {
  MetricsOptions options = loopback();
  options.token = kToken;
  Metrics metrics(options);
  EXPECT_EQ(get(metrics.port()).status, 401);
  EXPECT_EQ(get(metrics.port(), "/metrics", "hangscope:wrong").status, 401);
  EXPECT_EQ(get(metrics.port(), "/metrics", "hangscope:" + kToken.substr(1)).status, 401);
  EXPECT_EQ(get(metrics.port(), "/metrics", "hangscope:" + kToken + "x").status, 401);
  const Response response = get(metrics.port(), "/metrics", "hangscope:" + kToken);
  EXPECT_EQ(response.status, 200);
  EXPECT_TRUE(sample(response.body, "hangscope_watch_jobs").has_value()) << response.body;
  EXPECT_EQ(get(metrics.port(), "/metrics", "prometheus:" + kToken).status, 200) << "any user";
}

// Each scrape reads one moment: while set_jobs alternates between two sets, every scrape holds
// exactly one of them, never a mix or a half.
TEST(WatchMetrics, AScrapeNeverSeesHalfAnUpdate) {
  Metrics metrics(loopback());
  const std::vector<JobReading> first = {{"a", 1, 1, 0}, {"b", 1, 1, 0}};
  const std::vector<JobReading> second = {{"c", 2, 0, 1}, {"d", 2, 0, 1}, {"e", 2, 0, 1}};
  metrics.set_jobs(first);
  std::atomic<bool> stop = false;
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) metrics.set_jobs(i % 2 ? first : second);
  });
  for (int scrape = 0; scrape < 50; ++scrape) {
    const std::string text = get(metrics.port()).body;
    const auto jobs = sample(text, "hangscope_watch_jobs");
    ASSERT_TRUE(jobs.has_value()) << text;
    const bool is_first = sample(text, "hangscope_watch_job_ranks_waiting{job=\"a\"}").has_value();
    EXPECT_EQ(*jobs, is_first ? 2 : 3) << text;
    for (const char* job : {"a", "b", "c", "d", "e"}) {
      const bool in_first = job[0] <= 'b';
      EXPECT_EQ(sample(text, std::string("hangscope_watch_job_ranks_waiting{job=\"") + job + "\"}")
                    .has_value(),
                in_first == is_first)
          << job << " in:\n"
          << text;
    }
  }
  stop = true;
  writer.join();
}

// The server's threads (civetweb-*) block SIGTERM and SIGINT: the watcher's own threads take
// them, however it waits for them.
TEST(WatchMetrics, ServerThreadsBlockTheStopSignals) {
  Metrics metrics(loopback());
  ASSERT_EQ(get(metrics.port()).status, 200);
  int server_threads = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("civetweb", 0) != 0) continue;
    ++server_threads;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigBlk:", 0) != 0) continue;
      const unsigned long long blocked = std::stoull(line.substr(7), nullptr, 16);
      for (const int signal : {SIGTERM, SIGINT, SIGHUP}) {
        EXPECT_TRUE(blocked & (1ULL << (signal - 1))) << name << " does not block " << signal;
      }
    }
  }
  EXPECT_GT(server_threads, 0);
}

TEST(WatchMetrics, APortInUseIsNamed) {
  Metrics first(loopback());
  MetricsOptions options = loopback();
  options.endpoint = "127.0.0.1:" + std::to_string(first.port());
  const std::string message = refusal([&] { Metrics second(options); });
  EXPECT_NE(message.find("--metrics 127.0.0.1:" + std::to_string(first.port())), std::string::npos)
      << message;
  EXPECT_NE(message.find("in use"), std::string::npos) << message;
}

TEST(WatchMetrics, OptionsRefusedBeforeListening) {
  const auto check = [](MetricsOptions options) {
    return refusal([&] { check_metrics_options(options); });
  };
  MetricsOptions options;
  for (const char* accepted : {"127.0.0.1:9464", "9464", ":0", "localhost:9464", "127.0.0.2:1"}) {
    options.endpoint = accepted;
    EXPECT_EQ(check(options), "") << accepted;
  }

  // A non-loopback host: refused without a token, naming --metrics; a token or --insecure.
  options.endpoint = "0.0.0.0:9464";
  std::string message = check(options);
  EXPECT_NE(message.find("--metrics"), std::string::npos) << message;
  EXPECT_NE(message.find("0.0.0.0:9464"), std::string::npos) << message;
  EXPECT_NE(message.find("without authentication"), std::string::npos) << message;
  EXPECT_NE(message.find("--metrics-token-file"), std::string::npos) << message;
  options.insecure = true;
  EXPECT_EQ(check(options), "");
  options.insecure = false;
  options.token = kToken;
  EXPECT_EQ(check(options), "");
  options.endpoint = "10.1.2.3:9464";
  EXPECT_EQ(check(options), "");
  options.token = "short";  // the agent's minimum length
  message = check(options);
  EXPECT_NE(message.find("bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("--insecure"), std::string::npos) << message;
  options.endpoint = "127.0.0.1:9464";
  EXPECT_EQ(check(options), "") << "loopback: a short token is only warned about";

  // A token file others can read, as `collect` refuses it.
  const auto file = std::filesystem::temp_directory_path() / "hangscope-metrics-token-test";
  {
    std::ofstream out(file);
    out << kToken;
  }
  std::filesystem::permissions(file, std::filesystem::perms(0644));
  options.endpoint = "0.0.0.0:9464";
  options.token = kToken;
  options.token_file = file.string();
  message = check(options);
  EXPECT_NE(message.find("chmod 600"), std::string::npos) << message;
  EXPECT_NE(message.find("--metrics-token-file " + file.string()), std::string::npos) << message;
  std::filesystem::permissions(file, std::filesystem::perms(0600));
  EXPECT_EQ(check(options), "");
  std::filesystem::remove(file);

  // Endpoints.
  options = {};
  for (const auto& [endpoint, reason] : std::vector<std::pair<std::string, std::string>>{
           {"", "no endpoint"},
           {"127.0.0.1", "no port"},
           {"127.0.0.1:", "no port"},
           {"::1", "no port"},
           {"127.0.0.1:65536", "0 to 65535"},
           {"127.0.0.1:http", "0 to 65535"},
           {"127.0.0.1:-1", "0 to 65535"},
           {"node0:9464", "not a numeric address"},
           {"127.example.com:9464", "not a numeric address"}}) {
    options.endpoint = endpoint;
    message = check(options);
    EXPECT_NE(message.find("--metrics"), std::string::npos) << endpoint << ": " << message;
    EXPECT_NE(message.find(reason), std::string::npos) << endpoint << ": " << message;
  }
  // IPv6 where civetweb has it (Debian 12's has not: then a message that says so).
  options.endpoint = "[::1]:9464";
  message = check(options);
  if (!message.empty()) {
    EXPECT_NE(message.find("IPv6"), std::string::npos) << message;
  }

  // TLS: the certificate and key go together; then refused on this civetweb, by name.
  options.endpoint = "127.0.0.1:9464";
  options.tls_cert = "/etc/hangscope/metrics.crt";
  message = check(options);
  EXPECT_NE(message.find("--metrics-tls-cert without --metrics-tls-key"), std::string::npos)
      << message;
  options.tls_cert.clear();
  options.tls_key = "/etc/hangscope/metrics.key";
  message = check(options);
  EXPECT_NE(message.find("--metrics-tls-key without --metrics-tls-cert"), std::string::npos)
      << message;
  options.tls_cert = "/etc/hangscope/metrics.crt";
  message = check(options);
  EXPECT_NE(message.find("--metrics-tls-cert: TLS is not available"), std::string::npos) << message;

  // The constructor checks too.
  options = {};
  options.endpoint = "0.0.0.0:0";
  message = refusal([&] { Metrics metrics(options); });
  EXPECT_NE(message.find("without authentication"), std::string::npos) << message;
}

}  // namespace
}  // namespace hangscope::watch
