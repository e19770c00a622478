// The coordinator's fan-out (collect_all): every agent asked at once over one completion
// queue, so that thousands of nodes all have their Capture request before sample 0.
#include <google/protobuf/arena.h>
#include <grpcpp/alarm.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>

#include "agent_parts.h"
#include "hangscope/agent/agent.h"
#include "hangscope/common/address.h"
#include "hangscope/common/clock.h"
#include "hangscope/common/error.h"
#include "hangscope/snapshot/codec.h"
#include "hangscope/v1/agent.grpc.pb.h"

namespace hangscope::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Connections being opened at once (each by an Info call): enough to keep every core busy.
constexpr std::size_t kConnectWindow = 256;
// Clocks read at once, over open connections: few, so that a round trip is not spent queued
// (the clock offset is uncertain by half of it).
constexpr std::size_t kClockWindow = 16;
// Sample 0 is set at least one and a half times the clock pass ahead (see run()).
constexpr int kLeadPerClockPassHalves = 3;
constexpr std::chrono::milliseconds kInfoDeadline{5000};
// A node busy at Info (an agent out of serving threads) is asked again within this.
constexpr std::chrono::milliseconds kInfoRetries{15000};
constexpr std::chrono::milliseconds kFirstInfoPause{100};
// A node busy at Capture (other captures queued there) is asked again after this, doubled
// each time, until its deadline.
constexpr std::chrono::milliseconds kFirstBusyPause{500};
// Descriptors kept free beside one connection per agent (the bundle's files, gRPC's own).
constexpr std::size_t kSpareDescriptors = 128;
constexpr char kCaptureMethod[] = "/hangscope.v1.Agent/Capture";

// This process's CPU time so far and resident memory now (debug lines).
double cpu_ms() {
  return 1000.0 * static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
}
long rss_mib() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * ::sysconf(_SC_PAGESIZE) / (1 << 20);
}

std::chrono::nanoseconds since(Clock::time_point t) {
  return Clock::now() - t;
}

// The channel target of "host:port": a numeric address as itself (gRPC's ipv4:/ipv6: schemes,
// which resolve nothing: its DNS resolver cost a tenth of a fan-out's CPU for addresses that
// are already numbers), a name through DNS. The authority the agent sees is "host:port" alike.
std::string target(const std::string& address) {
  const HostPort endpoint = split_endpoint(address);
  if (!is_ip_literal(endpoint.host)) return address;
  return (endpoint.host.find(':') == std::string::npos ? "ipv4:" : "ipv6:") + address;
}

// A reply as it came (its bytes), with the connection it came over.
struct Arrival {
  std::size_t index = 0;
  std::unique_ptr<grpc::ByteBuffer> bytes;
  std::shared_ptr<grpc::Channel> channel;  // closed once the reply is decoded
  std::unique_ptr<v1::Agent::Stub> stub;
};

// Replies parsed and decoded off the completion queue's thread, as they arrive, and their
// connections closed there: the queue's thread only moves bytes.
class Decoder {
 public:
  using Done = std::function<void(std::size_t index)>;
  Decoder(std::vector<AgentAnswer>& answers, Done done)
      : answers_(answers), done_(std::move(done)) {
    const unsigned workers = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
    for (unsigned w = 0; w < workers; ++w) threads_.emplace_back([this] { work(); });
  }
  ~Decoder() { finish(); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  void add(Arrival arrival) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(arrival));
    }
    wake_.notify_one();
  }
  // Waits until every reply is decoded.
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closing_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void work() {
    for (;;) {
      Arrival arrival;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;
        arrival = std::move(queue_.front());
        queue_.pop_front();
      }
      const std::size_t index = arrival.index;
      decode(arrival);
      arrival = Arrival();  // its connection closes here
      done_(index);
    }
  }

  void decode(const Arrival& arrival) {
    auto& answer = answers_[arrival.index];
#if defined(__SANITIZE_THREAD__)
    // No arena in the ThreadSanitizer build: protobuf's map_field.h gives MapFieldBase two more
    // fields when the including code is built with TSan, and Debian's libprotobuf is not, so
    // the library's arena clean-up of a map field (RankIdentity.sources, …) reads the wrong
    // layout and crashes. A message of its own is destroyed by the including code's inline
    // destructors, which agree with themselves.
    v1::CaptureReply own_reply;
    auto* reply = &own_reply;
#else
    // The message and its strings in one arena: parsed and freed in a few allocations.
    google::protobuf::ArenaOptions options;
    options.start_block_size = 64 * 1024;
    options.max_block_size = 1024 * 1024;
    google::protobuf::Arena arena(options);
    auto* reply = google::protobuf::Arena::CreateMessage<v1::CaptureReply>(&arena);
#endif
    grpc::ProtoBufferReader reader(arrival.bytes.get());
    if (!reply->ParseFromZeroCopyStream(&reader)) {
      answer.status = model::NodeState::kError;
      answer.error = "bad answer: not a Capture reply";
      return;
    }
    answer.notes.assign(reply->notes().begin(), reply->notes().end());
    try {
      answer.snapshots.reserve(static_cast<std::size_t>(reply->snapshots_size()));
      for (const auto& s : reply->snapshots()) answer.snapshots.push_back(snapshot::decode(s));
    } catch (const std::exception& e) {  // nothing may escape a thread
      answer.snapshots.clear();
      answer.status = model::NodeState::kError;
      answer.error = std::string("bad answer: ") + e.what();
    }
  }

  std::vector<AgentAnswer>& answers_;
  Done done_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Arrival> queue_;
  bool closing_ = false;
  std::vector<std::thread> threads_;
};

class Fanout {
 public:
  Fanout(const std::vector<std::string>& addresses, const CollectRequest& request,
         FanoutListener& listener)
      : request_(request), listener_(listener), answers_(addresses.size()) {
    nodes_.resize(addresses.size());
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      answers_[i].address = normalize_address(addresses[i]);
      nodes_[i].index = i;
    }
  }

  std::vector<AgentAnswer> run(FanoutTimes& times) {
    asked_ = within_descriptor_limit(times);
    try {
      credentials_ = parts::channel_credentials(request_);
    } catch (const Error& e) {
      for (std::size_t i = 0; i < asked_; ++i) fail(nodes_[i], model::NodeState::kError, e.what());
      return std::move(answers_);
    }
    // Each channel its own subchannel: no map shared by thousands of channels; no channelz
    // bookkeeping per channel.
    args_.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args_.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);

    // Every agent's connection, kConnectWindow nodes at a time, then every clock over them,
    // kClockWindow at a time: a round trip the coordinator's queue prolongs (while it opens
    // other connections) makes the offset uncertain by half of it.
    const auto clocks_began = Clock::now();
    std::vector<Node*> all;
    for (std::size_t i = 0; i < asked_; ++i) all.push_back(&nodes_[i]);
    windowed(all, kConnectWindow, Stage::kConnect);
    std::vector<Node*> connected;
    for (Node* node : all) {
      if (node->stage == Stage::kConnected) connected.push_back(node);
    }
    const auto connected_at = Clock::now();
    spdlog::debug("fan-out: {} connections in {:.0f} ms ({:.0f} ms of CPU, {} MiB)",
                  connected.size(), static_cast<double>(since(clocks_began).count()) / 1e6,
                  cpu_ms(), rss_mib());
    windowed(connected, kClockWindow, Stage::kClock);
    const auto clock_pass = since(connected_at);
    times.clocks = since(clocks_began);
    spdlog::debug(
        "fan-out: {} clocks read in {:.0f} ms, over open connections in {:.0f} ms ({:.0f} "
        "ms of CPU)",
        connected.size(), static_cast<double>(times.clocks.count()) / 1e6,
        static_cast<double>(clock_pass.count()) / 1e6, cpu_ms());

    // Sample 0: far enough ahead that every node has its request before it.
    Decoder decoder(answers_, [this](std::size_t index) { finished(answers_[index]); });
    decoder_ = &decoder;
    std::vector<Node*> ready;
    for (std::size_t i = 0; i < asked_; ++i) {
      if (nodes_[i].stage == Stage::kClockRead) ready.push_back(&nodes_[i]);
    }
    const auto chosen = Clock::now();
    // The clock pass sent every node one small request over its open connection and had its
    // answer: what sending every node its Capture request costs here, measured now (the
    // network, TLS, this machine's load), and a floor per node measured once.
    const auto lead = std::max(
        {std::chrono::nanoseconds(request_.min_lead),
         std::chrono::nanoseconds(kCaptureSendCost) * static_cast<std::int64_t>(ready.size()),
         clock_pass * kLeadPerClockPassHalves / 2});
    start_ = std::chrono::system_clock::now() +
             std::chrono::duration_cast<std::chrono::system_clock::duration>(lead);
    const auto span = request_.interval * std::max(request_.samples - 1, 0);
    give_up_ = chosen + lead + span + request_.answer_within;
    capture_.set_samples(static_cast<std::uint32_t>(request_.samples));
    capture_.set_interval_ns(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(request_.interval).count()));
    capture_.set_locals(request_.locals);
    pending_ = ready.size();
    for (Node* node : ready) begin_capture(*node);
    times.asked = ready.size();
    times.start = start_;
    times.lead = lead;
    times.sent = since(chosen);
    spdlog::debug("fan-out: {} Capture requests sent in {:.1f} ms ({:.0f} ms of CPU)", ready.size(),
                  static_cast<double>(times.sent.count()) / 1e6, cpu_ms());
    {
      std::lock_guard<std::mutex> lock(listener_mutex_);
      listener_.sampling(times);
    }
    drain();
    spdlog::debug(
        "fan-out: every answer received {:.0f} ms after the start ({:.0f} ms of CPU, {} MiB)",
        static_cast<double>((std::chrono::system_clock::now() - start_).count()) / 1e6, cpu_ms(),
        rss_mib());
    decoder.finish();
    spdlog::debug("fan-out: every answer decoded ({:.0f} ms of CPU, {} MiB)", cpu_ms(), rss_mib());
    // The connections and the replies' bytes are freed by now, mostly in other threads' arenas
    // than the one the decoded snapshots grow in: given back to the system, they no longer add
    // to the peak the analysis reaches (8,192 replayed nodes: 1,591 -> 1,475 MiB; 50 ms).
    ::malloc_trim(0);
    spdlog::debug("fan-out: freed memory returned ({} MiB)", rss_mib());
    decoder_ = nullptr;
    times.worst_round_trip = std::chrono::nanoseconds(worst_round_trip_);
    return std::move(answers_);
  }

  // The queue is shut down and drained before it goes (every call is through by then).
  ~Fanout() {
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }
  Fanout(const Fanout&) = delete;
  Fanout& operator=(const Fanout&) = delete;

 private:
  enum class Stage {
    kNew,
    kConnect,       // the first Info call in flight (it opens the connection)
    kConnectPause,  // busy: waiting to ask again
    kConnected,
    kClock,  // the second Info call in flight: the clock over an open connection
    kClockPause,
    kClockRead,     // its clock is known: ready for its Capture request
    kCapture,       // the Capture call in flight
    kCapturePause,  // busy: waiting to ask again
    kDone,
  };

  struct Node {
    std::size_t index = 0;
    Stage stage = Stage::kNew;
    std::shared_ptr<grpc::Channel> channel;  // one connection per agent
    std::unique_ptr<v1::Agent::Stub> stub;
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientAsyncResponseReader<v1::InfoReply>> info_call;
    std::unique_ptr<v1::InfoReply> info;
    std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::ByteBuffer>> capture_call;
    std::unique_ptr<grpc::ByteBuffer> reply;  // as it came: parsed by the Decoder
    grpc::Status status;
    std::unique_ptr<grpc::Alarm> alarm;
    std::int64_t sent_ns = 0;
    std::int64_t best_round_trip = std::numeric_limits<std::int64_t>::max();
    Clock::time_point retry_until;
    std::chrono::milliseconds pause{0};
  };

  // The nodes one connection each allows (after raising the soft limit to the hard one); the
  // others are answers in error that say why.
  std::size_t within_descriptor_limit(FanoutTimes& times) {
    const std::uint64_t limit = parts::raise_descriptor_limit();
    times.descriptor_limit = static_cast<std::size_t>(std::min<std::uint64_t>(limit, SIZE_MAX));
    const std::uint64_t used = parts::open_descriptors() + kSpareDescriptors;
    const std::size_t room = limit > used ? static_cast<std::size_t>(limit - used) : 0;
    if (nodes_.size() <= room) return nodes_.size();
    const std::string why = "not asked: this process may open " + std::to_string(limit) +
                            " descriptors (RLIMIT_NOFILE), one connection per agent is " +
                            std::to_string(nodes_.size()) +
                            " connections; raise the limit (ulimit -n, systemd LimitNOFILE=)";
    {
      std::lock_guard<std::mutex> lock(listener_mutex_);
      listener_.warning(
          "only " + std::to_string(room) + " of " + std::to_string(nodes_.size()) +
          " agents can be asked at once: " + why.substr(std::string("not asked: ").size()));
    }
    for (std::size_t i = room; i < nodes_.size(); ++i) {
      fail(nodes_[i], model::NodeState::kError, why);
    }
    return room;
  }

  void prepare(grpc::ClientContext& context, Clock::time_point deadline) const {
    context.set_deadline(std::chrono::system_clock::now() + (deadline - Clock::now()));
    if (!request_.token.empty()) context.AddMetadata("authorization", "Bearer " + request_.token);
  }

  void begin_info(Node& node, Stage stage) {
    if (!node.stub) {
      node.channel =
          grpc::CreateCustomChannel(target(answers_[node.index].address), credentials_, args_);
      node.stub = v1::Agent::NewStub(node.channel);
      node.retry_until = Clock::now() + kInfoRetries;
      node.pause = kFirstInfoPause;
    }
    node.stage = stage;
    node.context = std::make_unique<grpc::ClientContext>();
    prepare(*node.context, Clock::now() + kInfoDeadline);
    node.info = std::make_unique<v1::InfoReply>();
    node.sent_ns = unix_now_ns();
    node.info_call = node.stub->PrepareAsyncInfo(node.context.get(), v1::InfoRequest(), &cq_);
    node.info_call->StartCall();
    node.info_call->Finish(node.info.get(), &node.status, &node);
  }

  // Asks every node of `nodes` its Info (`stage`: kConnect or kClock), `window` at a time,
  // until each is through (its clock read, or failed).
  void windowed(const std::vector<Node*>& nodes, std::size_t window, Stage stage) {
    queue_ = nodes;
    next_ = 0;
    in_flight_ = 0;
    pending_ = nodes.size();
    while (next_ < queue_.size() && in_flight_ < window) {
      ++in_flight_;
      begin_info(*queue_[next_++], stage);
    }
    window_stage_ = stage;
    drain();
  }

  // A node of a windowed pass is through: the next one starts.
  void through() {
    --pending_;
    --in_flight_;
    if (next_ < queue_.size()) {
      ++in_flight_;
      begin_info(*queue_[next_++], window_stage_);
    }
  }

  void clock_told() {
    std::lock_guard<std::mutex> lock(listener_mutex_);
    listener_.clock_read(++clocks_told_, nodes_.size());
  }

  void begin_capture(Node& node) {
    node.stage = Stage::kCapture;
    node.context = std::make_unique<grpc::ClientContext>();
    prepare(*node.context, give_up_);
    const std::int64_t start =
        std::chrono::duration_cast<std::chrono::nanoseconds>(start_.time_since_epoch()).count();
    capture_.set_start_unix_ns(start + answers_[node.index].clock_offset_ns);
    const grpc::Slice bytes(capture_.SerializeAsString());
    node.reply = std::make_unique<grpc::ByteBuffer>();
    // As bytes (the generic stub): the reply is parsed by the Decoder, not on this thread.
    grpc::GenericStub stub(node.channel);
    node.capture_call = stub.PrepareUnaryCall(node.context.get(), kCaptureMethod,
                                              grpc::ByteBuffer(&bytes, 1), &cq_);
    node.capture_call->StartCall();
    node.capture_call->Finish(node.reply.get(), &node.status, &node);
  }

  // Waits on the queue until no node of this phase is pending.
  void drain() {
    while (pending_ > 0) {
      void* tag = nullptr;
      bool ok = false;
      if (!cq_.Next(&tag, &ok)) break;
      step(*static_cast<Node*>(tag), ok);
    }
  }

  void pause(Node& node, Stage stage) {
    node.stage = stage;
    node.context.reset();
    if (!node.alarm) node.alarm = std::make_unique<grpc::Alarm>();
    node.alarm->Set(&cq_, std::chrono::system_clock::now() + node.pause, &node);
    node.pause *= 2;
  }

  void step(Node& node, bool ok) {
    auto& answer = answers_[node.index];
    switch (node.stage) {
      case Stage::kConnect:
      case Stage::kClock: {
        node.info_call.reset();
        const bool clock = node.stage == Stage::kClock;
        if (node.status.ok()) {
          const std::int64_t received = unix_now_ns();
          const std::int64_t round_trip = received - node.sent_ns;
          if (round_trip < node.best_round_trip) {
            node.best_round_trip = round_trip;
            answer.clock_offset_ns = node.info->clock_unix_ns() - (node.sent_ns + received) / 2;
            answer.node_name = node.info->node_name();
          }
          node.context.reset();
          node.info.reset();
          if (clock) {
            worst_round_trip_ = std::max(worst_round_trip_, node.best_round_trip);
            node.stage = Stage::kClockRead;
            clock_told();
          } else {
            node.stage = Stage::kConnected;
          }
          through();
        } else if (node.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                   Clock::now() + node.pause < node.retry_until) {
          pause(node, clock ? Stage::kClockPause : Stage::kConnectPause);
        } else {
          failed(node, node.status);
          clock_told();
          through();
        }
        return;
      }
      case Stage::kConnectPause:
        begin_info(node, Stage::kConnect);
        return;
      case Stage::kClockPause:
        begin_info(node, Stage::kClock);
        return;
      case Stage::kCapture: {
        node.capture_call.reset();
        node.context.reset();
        if (node.status.ok()) {
          node.stage = Stage::kDone;
          node.alarm.reset();
          --pending_;
          decoder_->add(
              {node.index, std::move(node.reply), std::move(node.channel), std::move(node.stub)});
        } else if (node.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
                   Clock::now() + node.pause < give_up_ - node.pause) {
          if (node.pause < kFirstBusyPause) node.pause = kFirstBusyPause;
          pause(node, Stage::kCapturePause);
        } else {
          --pending_;
          failed(node, node.status);
        }
        return;
      }
      case Stage::kCapturePause:
        (void)ok;
        begin_capture(node);
        return;
      case Stage::kNew:
      case Stage::kConnected:
      case Stage::kClockRead:
      case Stage::kDone:
        spdlog::debug("fan-out: unexpected event for {}", answer.address);
        return;
    }
  }

  void failed(Node& node, const grpc::Status& status) {
    auto& answer = answers_[node.index];
    parts::fill_status(answer, status);
    node.stage = Stage::kDone;
    node.stub.reset();
    node.channel.reset();
    node.context.reset();
    node.info.reset();
    node.reply.reset();
    node.alarm.reset();
    finished(answer);
  }

  void fail(Node& node, model::NodeState state, const std::string& why) {
    auto& answer = answers_[node.index];
    answer.status = state;
    answer.error = why;
    node.stage = Stage::kDone;
    finished(answer);
  }

  void finished(const AgentAnswer& answer) {
    std::lock_guard<std::mutex> lock(listener_mutex_);
    listener_.answered(answer, ++answered_, answers_.size());
  }

  const CollectRequest& request_;
  FanoutListener& listener_;
  std::mutex listener_mutex_;
  std::vector<AgentAnswer> answers_;
  std::vector<Node> nodes_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  grpc::ChannelArguments args_;
  grpc::CompletionQueue cq_;
  std::size_t asked_ = 0;     // nodes within the descriptor limit
  std::size_t pending_ = 0;   // nodes of the current phase not through it
  std::vector<Node*> queue_;  // the nodes of the windowed pass under way
  Stage window_stage_ = Stage::kNew;
  std::size_t in_flight_ = 0;  // nodes of it asked and not through
  std::size_t next_ = 0;       // the next node of it to ask
  std::size_t clocks_told_ = 0;
  std::size_t answered_ = 0;
  std::int64_t worst_round_trip_ = 0;
  std::chrono::system_clock::time_point start_;
  Clock::time_point give_up_;
  v1::CaptureRequest capture_;
  Decoder* decoder_ = nullptr;
};

}  // namespace

std::vector<AgentAnswer> collect_all(const std::vector<std::string>& addresses,
                                     const CollectRequest& request, FanoutListener& listener,
                                     FanoutTimes* times) {
  parts::no_lock_order_tracking();
  FanoutTimes local;
  Fanout fanout(addresses, request, listener);
  return fanout.run(times != nullptr ? *times : local);
}

}  // namespace hangscope::agent
