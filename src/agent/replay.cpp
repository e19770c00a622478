#include "replay.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "agent_parts.h"
#include "hangscope/common/clock.h"
#include "hangscope/common/error.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/v1/agent.grpc.pb.h"
#include "hangscope/version.h"

namespace hangscope::agent {
namespace {

// Descriptors a replay keeps beside its listeners and connections (its files while it reads
// them, gRPC's own, the log).
constexpr std::size_t kReplaySpareDescriptors = 64;

void append_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// Field numbers of the messages framed by hand below (agent.proto, snapshot.proto).
constexpr std::uint32_t kReplySnapshots = 1;  // CaptureReply and ObserveReply
constexpr std::uint32_t kReplyNotes = 2;
constexpr std::uint32_t kSnapshotCaptureUnixNs = 5;  // NodeSnapshot
constexpr std::uint32_t kSnapshotSampleIndex = 7;
constexpr std::uint32_t kVarint = 0;
constexpr std::uint32_t kLengthDelimited = 2;

void append_tag(std::string& out, std::uint32_t field, std::uint32_t wire_type) {
  append_varint(out, (field << 3) | wire_type);
}

// One snapshot of a reply: recorded bytes, and the capture time and sample index this replay
// gives it (when set).
struct ReplySample {
  const std::string* recorded = nullptr;
  std::optional<std::int64_t> capture_unix_ns;
  std::optional<int> sample_index;
};

// A CaptureReply or ObserveReply (both: field 1 the snapshots, field 2 the notes) in its wire
// form, without parsing or copying the recorded snapshots: each is sent from the node's own
// bytes (a static slice: the nodes outlive the server's calls), followed by its new capture
// time and index, since a parser keeps the last value of a field that appears twice
// (protobuf's encoding rules, "last one wins").
grpc::ByteBuffer framed_reply(const std::vector<ReplySample>& samples,
                              const std::vector<std::string>& notes) {
  std::vector<grpc::Slice> slices;
  for (const auto& sample : samples) {
    std::string trailer;
    if (sample.capture_unix_ns) {
      append_tag(trailer, kSnapshotCaptureUnixNs, kVarint);
      append_varint(trailer, static_cast<std::uint64_t>(*sample.capture_unix_ns));
    }
    if (sample.sample_index) {
      append_tag(trailer, kSnapshotSampleIndex, kVarint);
      append_varint(trailer, static_cast<std::uint64_t>(*sample.sample_index));
    }
    std::string head;
    append_tag(head, kReplySnapshots, kLengthDelimited);
    append_varint(head, sample.recorded->size() + trailer.size());
    slices.emplace_back(head);
    slices.emplace_back(sample.recorded->data(), sample.recorded->size(),
                        grpc::Slice::STATIC_SLICE);
    if (!trailer.empty()) slices.emplace_back(trailer);
  }
  for (const auto& note : notes) {
    std::string head;
    append_tag(head, kReplyNotes, kLengthDelimited);
    append_varint(head, note.size());
    slices.emplace_back(head + note);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

bool parse(const grpc::ByteBuffer& bytes, google::protobuf::MessageLite& message) {
  std::vector<grpc::Slice> slices;
  if (!bytes.Dump(&slices).ok()) return false;
  std::string all;
  for (const auto& slice : slices) {
    all.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return message.ParseFromString(all);
}

std::string local_hostname() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

struct Replay::State {
  // A recorded node (a type of the class, not of this file's anonymous namespace: the
  // sanitizer builds are unity builds, where GCC warns of such a field).
  struct Node {
    std::string name;
    std::vector<std::string> samples;  // each a serialized v1::NodeSnapshot, as recorded
    std::atomic<long> busy_calls{0};   // Capture calls still to refuse as busy
  };

  // A Capture call waiting for its samples: sample i is taken (stamped) at start + i *
  // interval on this machine's clock, like an agent's capture_series, and the reply goes once
  // the last one is.
  struct Pending {
    grpc::ServerUnaryReactor* reactor = nullptr;
    grpc::ByteBuffer* response = nullptr;
    const Node* node = nullptr;
    int samples = 1;
    std::int64_t start = 0;
    std::int64_t interval = 0;
    std::vector<std::int64_t> taken;  // when each sample was taken
    std::vector<std::string> notes;
    std::int64_t due() const { return start + static_cast<std::int64_t>(taken.size()) * interval; }
  };
  using Due = std::pair<std::int64_t, Pending*>;

  // Info and Health as messages; Capture and Observe as bytes, framed by framed_reply.
  using ServiceBase = v1::Agent::WithCallbackMethod_Info<
      v1::Agent::WithCallbackMethod_Health<v1::Agent::WithRawCallbackMethod_Capture<
          v1::Agent::WithRawCallbackMethod_Observe<v1::Agent::Service>>>>;
  class Service final : public ServiceBase {
   public:
    explicit Service(State& state) : state_(state) {}
    // The synchronous forms stay hidden behind the callback ones (they are never called).
    using ServiceBase::Capture;
    using ServiceBase::Health;
    using ServiceBase::Info;
    using ServiceBase::Observe;

    grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context, const v1::InfoRequest*,
                                   v1::InfoReply* reply) override {
      auto* reactor = context->DefaultReactor();
      if (auto denied = parts::authenticate(*context, state_.options.token, "Info")) {
        reactor->Finish(*denied);
        return reactor;
      }
      const Node* node = state_.find(context->ExperimentalGetAuthority());
      if (node == nullptr) {
        reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "no replayed node"));
        return reactor;
      }
      reply->set_node_name(node->name);
      reply->set_hostname(state_.hostname);
      reply->set_agent_version(kVersion);
      reply->set_clock_unix_ns(unix_now_ns());
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }

    grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context, const v1::HealthRequest*,
                                     v1::HealthReply* reply) override {
      auto* reactor = context->DefaultReactor();
      if (auto denied = parts::authenticate(*context, state_.options.token, "Health")) {
        reactor->Finish(*denied);
        return reactor;
      }
      reply->set_serving(true);
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }

    grpc::ServerUnaryReactor* Capture(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* bytes,
                                      grpc::ByteBuffer* response) override {
      auto* reactor = context->DefaultReactor();
      const auto finish = [&](const grpc::Status& status) {
        reactor->Finish(status);
        return reactor;
      };
      v1::CaptureRequest request;
      if (auto refused = admit(*context, *bytes, "Capture", request)) return finish(*refused);
      std::string note;
      const int samples = parts::clamp_samples(request, &note);
      const std::int64_t now = unix_now_ns();
      if (auto refused = parts::check_capture(request, samples, now, state_.options.selection.pids,
                                              *context)) {
        return finish(*refused);
      }
      Node* node = state_.find(context->ExperimentalGetAuthority());
      if (node == nullptr) {
        return finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "no replayed node"));
      }
      if (node->busy_calls.fetch_sub(1) > 0) {
        return finish(
            grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "agent busy (replayed): try again"));
      }
      auto pending = std::make_unique<Pending>();
      pending->reactor = reactor;
      pending->response = response;
      pending->node = node;
      pending->samples = samples;
      pending->start = parts::sampling_start(request.start_unix_ns(), now);
      pending->interval = static_cast<std::int64_t>(request.interval_ns());
      if (!note.empty()) pending->notes.push_back(note);
      spdlog::debug("replay: Capture for {} with sample 0 due in {:.1f} ms", node->name,
                    static_cast<double>(pending->start - now) / 1e6);
      if (!state_.schedule(std::move(pending))) {
        return finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the agent is shutting down"));
      }
      return reactor;
    }

    grpc::ServerUnaryReactor* Observe(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* bytes,
                                      grpc::ByteBuffer* response) override {
      auto* reactor = context->DefaultReactor();
      const auto finish = [&](const grpc::Status& status) {
        reactor->Finish(status);
        return reactor;
      };
      v1::ObserveRequest request;
      if (auto refused = admit(*context, *bytes, "Observe", request)) return finish(*refused);
      std::vector<std::string> notes;
      if (request.window_ns() > static_cast<std::uint64_t>(AgentLimits::kMaxObserveWindowNs)) {
        notes.push_back("asked for a window of " + std::to_string(request.window_ns() / 1'000'000) +
                        " ms; this agent observes at most 10 s at once");
      }
      if (auto refused = parts::check_pids(request.pids(), state_.options.selection.pids, "Observe",
                                           *context)) {
        return finish(*refused);
      }
      const Node* node = state_.find(context->ExperimentalGetAuthority());
      if (node == nullptr) {
        return finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "no replayed node"));
      }
      // The recorded first and last samples, as they were recorded.
      *response =
          framed_reply({{&node->samples.front(), {}, {}}, {&node->samples.back(), {}, {}}}, notes);
      return finish(grpc::Status::OK);
    }

   private:
    // What every raw call checks first: the caller's token, then its request's bytes.
    std::optional<grpc::Status> admit(const grpc::CallbackServerContext& context,
                                      const grpc::ByteBuffer& bytes, const char* method,
                                      google::protobuf::MessageLite& request) const {
      if (auto denied = parts::authenticate(context, state_.options.token, method)) return denied;
      if (!parse(bytes, request)) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unreadable request");
      }
      return std::nullopt;
    }

    State& state_;
  };

  State(const AgentOptions& o, int base)
      : options(o), base_port(base), nodes(o.replay_files.size()) {}

  // The node behind the port in "host:port" (the authority), or nullptr.
  Node* find(grpc::string_ref authority) {
    const std::string text(authority.data(), authority.size());
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return nullptr;
    const long index = std::strtol(text.c_str() + colon + 1, nullptr, 10) - base_port;
    if (index < 0 || static_cast<std::size_t>(index) >= nodes.size()) return nullptr;
    return &nodes[static_cast<std::size_t>(index)];
  }

  // Reads every file, a few at a time; the first failure is thrown, naming its file.
  void load() {
    std::atomic<std::size_t> next{0};
    std::mutex failure_mutex;
    std::string failure;
    const auto work = [&] {
      for (std::size_t i = next++; i < nodes.size(); i = next++) {
        const auto& file = options.replay_files[i];
        try {
          Node& node = nodes[i];
          for (const auto& snapshot : snapshot::read_file(file)) {
            if (node.name.empty()) node.name = snapshot.node_name;
            v1::NodeSnapshot encoded;
            snapshot::encode(snapshot, encoded);
            node.samples.push_back(encoded.SerializeAsString());
          }
          if (node.samples.empty()) throw Error(file + ": no snapshot to replay");
          node.busy_calls = options.replay_busy_calls;
        } catch (const std::exception& e) {  // nothing may escape a thread
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (failure.empty()) failure = e.what();
          next = nodes.size();
        }
      }
    };
    std::vector<std::thread> workers;
    const std::size_t parallel = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 4);
    for (std::size_t w = 1; w < std::min(parallel, nodes.size()); ++w) workers.emplace_back(work);
    work();
    for (auto& w : workers) w.join();
    if (!failure.empty()) throw Error(failure);
  }

  // Queues a call for its samples; false once stopping.
  bool schedule(std::unique_ptr<Pending> pending) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (stopping) return false;
      push(pending.release());
    }
    wake.notify_one();
    return true;
  }

  void push(Pending* pending) {
    due.emplace_back(pending->due(), pending);
    std::push_heap(due.begin(), due.end(), std::greater<>());
  }

  // The samples' clock: wakes at each due time, stamps every sample due then (all of them
  // first, so that many nodes due at one moment are stamped together), then answers the calls
  // whose last sample that was.
  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      if (due.empty()) {
        wake.wait(lock);
        continue;
      }
      const std::int64_t now = unix_now_ns();
      if (due.front().first > now) {
        wake.wait_for(lock, std::chrono::nanoseconds(due.front().first - now));
        continue;
      }
      std::vector<Pending*> batch;
      while (!due.empty() && due.front().first <= now) {
        std::pop_heap(due.begin(), due.end(), std::greater<>());
        batch.push_back(due.back().second);
        due.pop_back();
      }
      lock.unlock();
      for (auto* pending : batch) pending->taken.push_back(unix_now_ns());
      if (spdlog::should_log(spdlog::level::debug)) {
        std::int64_t latest = 0;
        for (auto* pending : batch) {
          const auto i = static_cast<std::int64_t>(pending->taken.size()) - 1;
          latest = std::max(latest, pending->taken.back() - pending->start - i * pending->interval);
        }
        spdlog::debug("replay: {} sample(s) taken, the latest {:.1f} ms after it was due",
                      batch.size(), static_cast<double>(latest) / 1e6);
      }
      std::vector<Pending*> complete;
      lock.lock();
      for (auto* pending : batch) {
        if (static_cast<int>(pending->taken.size()) < pending->samples) {
          push(pending);
        } else {
          complete.push_back(pending);
        }
      }
      lock.unlock();
      if (!complete.empty()) {
        {
          std::lock_guard<std::mutex> answers_lock(answers_mutex);
          answers.insert(answers.end(), complete.begin(), complete.end());
        }
        answers_wake.notify_one();
      }
      lock.lock();
    }
    // Stopping: every call still waiting is answered, none is left to the server's shutdown.
    auto left = std::move(due);
    due.clear();
    lock.unlock();
    for (auto& [at, pending] : left) {
      pending->reactor->Finish(
          grpc::Status(grpc::StatusCode::CANCELLED, "the agent is shutting down"));
      delete pending;
    }
  }

  // Sends the replies of the calls whose samples are all taken, off the clock's thread: a
  // thousand replies sent at one moment must not delay the samples due then.
  void send_answers() {
    std::unique_lock<std::mutex> lock(answers_mutex);
    for (;;) {
      answers_wake.wait(lock, [this] { return answers_closing || !answers.empty(); });
      if (answers.empty()) return;
      auto batch = std::move(answers);
      answers.clear();
      lock.unlock();
      for (auto* pending : batch) answer(std::unique_ptr<Pending>(pending));
      lock.lock();
    }
  }

  // A node recorded with fewer samples than asked for answers its last one again for the
  // rest, each stamped when it was due.
  static void answer(std::unique_ptr<Pending> pending) {
    std::vector<ReplySample> samples;
    const auto& recorded = pending->node->samples;
    for (int i = 0; i < pending->samples; ++i) {
      const auto which = std::min<std::size_t>(static_cast<std::size_t>(i), recorded.size() - 1);
      samples.push_back({&recorded[which], pending->taken[static_cast<std::size_t>(i)], i});
    }
    *pending->response = framed_reply(samples, pending->notes);
    pending->reactor->Finish(grpc::Status::OK);
  }

  const AgentOptions& options;
  int base_port;
  std::vector<Node> nodes;
  std::string hostname = local_hostname();
  Service service{*this};
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<Due> due;  // a min-heap by due time
  bool stopping = false;
  std::thread clock;
  std::mutex answers_mutex;
  std::condition_variable answers_wake;
  std::vector<Pending*> answers;  // calls whose samples are all taken, to answer
  bool answers_closing = false;
  std::thread answering;
};

Replay::Replay(const AgentOptions& options, int base_port)
    : state_(std::make_unique<State>(options, base_port)) {
  const std::size_t files = options.replay_files.size();
  const std::uint64_t limit = parts::raise_descriptor_limit();
  const std::uint64_t needed = 2 * files + kReplaySpareDescriptors + parts::open_descriptors();
  if (needed > limit) {
    throw Error("--replay of " + std::to_string(files) +
                " files needs a listening port and a connection for each, about " +
                std::to_string(needed) + " descriptors, and this process may open " +
                std::to_string(limit) +
                " (RLIMIT_NOFILE, `ulimit -n`): serve the files from several processes, each "
                "from its own --listen port, or raise the hard limit");
  }
  state_->load();
  state_->clock = std::thread([this] { state_->run(); });
  state_->answering = std::thread([this] { state_->send_answers(); });
}

Replay::~Replay() {
  stop();
}

grpc::Service* Replay::service() {
  return &state_->service;
}

std::size_t Replay::size() const {
  return state_->nodes.size();
}

void Replay::stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (state_->clock.joinable()) state_->clock.join();
  {
    std::lock_guard<std::mutex> lock(state_->answers_mutex);
    state_->answers_closing = true;
  }
  state_->answers_wake.notify_all();
  if (state_->answering.joinable()) state_->answering.join();
}

}  // namespace hangscope::agent
