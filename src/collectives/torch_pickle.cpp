#include "hangscope/collectives/torch_pickle.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <unordered_map>
#include <vector>

#include "hangscope/common/error.h"
#include "hangscope/common/text.h"

namespace hangscope::collectives {
namespace {

using nlohmann::json;

// The opcodes of torch/csrc/jit/serialization/pickler.h that its Pickler writes for plain data.
enum Op : unsigned char {
  kMark = '(',
  kStop = '.',
  kBinFloat = 'G',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinUnicode = 'X',
  kAppend = 'a',
  kAppends = 'e',
  kGlobal = 'c',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kReduce = 'R',
  kSetItem = 's',
  kSetItems = 'u',
  kTuple = 't',
  kEmptyTuple = ')',
  kEmptyList = ']',
  kEmptyDict = '}',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
};

// The globals Pickler writes around plain data: each call returns its first argument.
bool is_identity_global(const std::string& name) {
  return name == "torch.jit._pickle.restore_type_tag" ||
         name == "torch.jit._pickle.build_intlist" ||
         name == "torch.jit._pickle.build_doublelist" || name == "torch.jit._pickle.build_boollist";
}

constexpr std::size_t kMaxStack = 1u << 20;
constexpr std::size_t kMaxMemo = 1u << 22;

// What the decoder's own structures cost per entry, for the decoded-bytes budget.
constexpr std::size_t kMemoEntryBytes = 32;  // an unordered_map node and its bucket
constexpr std::size_t kStackEntryBytes = sizeof(Pickle::Id) + sizeof(std::size_t);

}  // namespace

// Builds a Pickle from the opcodes: each value is a node of the arena, made once; the stack,
// the memo and containers hold node ids, so a memo reference shares its value.
class Unpickler {
 public:
  Unpickler(const std::string& bytes, const PickleLimits& limits) : in_(bytes), limits_(limits) {}

  Pickle run() {
    if (in_.size() < 2 || static_cast<unsigned char>(in_[0]) != kProto) {
      fail("not a pickle (no PROTO opcode at the start)");
    }
    for (;;) {
      op_at_ = pos_;
      const auto op = static_cast<unsigned char>(byte());
      if (op == kStop) break;
      step(op);
    }
    if (stack_.size() != 1 || !marks_.empty()) fail("STOP with an unbalanced stack");
    out_.root_ = stack_.back();
    return std::move(out_);
  }

 private:
  using Id = Pickle::Id;
  using Kind = Pickle::Kind;

  [[noreturn]] void fail(const std::string& why) const {
    throw Error("pickle offset " + std::to_string(op_at_) + ": " + why);
  }

  void charge(std::size_t bytes) {
    out_.decoded_bytes_ += bytes;
    if (out_.decoded_bytes_ > limits_.max_decoded_bytes) {
      fail("the decoded values would take more than " +
           std::to_string(limits_.max_decoded_bytes >> 20) + " MiB; refused");
    }
  }

  char byte() {
    if (pos_ >= in_.size()) fail("truncated (no STOP opcode)");
    return in_[pos_++];
  }

  template <typename T>
  T little_endian() {
    if (in_.size() - pos_ < sizeof(T)) fail("truncated inside an argument");
    T value;
    std::memcpy(&value, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;  // x86-64 and aarch64 Linux are little-endian, as the format
  }

  std::string bytes(std::size_t n) {
    if (in_.size() - pos_ < n) fail("truncated inside a string");
    std::string out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  std::string line() {
    const auto end = in_.find('\n', pos_);
    if (end == std::string::npos) fail("truncated GLOBAL");
    std::string out = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

  Id node(Kind kind, std::uint64_t bits = 0, std::uint32_t ref = 0) {
    if (out_.nodes_.size() >= std::numeric_limits<Id>::max()) fail("too many values");
    charge(sizeof(Pickle::Node));
    out_.nodes_.push_back({kind, ref, bits});
    return static_cast<Id>(out_.nodes_.size() - 1);
  }

  Id string_node(Kind kind, std::string text) {
    charge(sizeof(std::string) + (text.size() >= 16 ? text.size() + 1 : 0));
    out_.strings_.push_back(std::move(text));
    return node(kind, 0, static_cast<std::uint32_t>(out_.strings_.size() - 1));
  }

  Id container_node(Kind kind) {
    charge(sizeof(std::vector<Id>));
    out_.containers_.emplace_back();
    return node(kind, 0, static_cast<std::uint32_t>(out_.containers_.size() - 1));
  }

  std::vector<Id>& items_of(Id id) { return out_.containers_[out_.nodes_[id].ref]; }

  // Adds `ids` to a container, charging what its storage grows by.
  void add_items(Id container, const Id* ids, std::size_t n) {
    auto& items = items_of(container);
    const std::size_t before = items.capacity();
    if (items.size() + n > before) {
      // Charged before the allocation: a growth past the budget is refused, not attempted.
      charge((std::max(items.size() + n, 2 * before) - before) * sizeof(Id));
    }
    items.insert(items.end(), ids, ids + n);
  }

  void push(Id value) {
    if (stack_.size() >= kMaxStack) fail("stack too deep");
    stack_.push_back(value);
  }

  Id pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("pop from an empty stack");
    const Id v = stack_.back();
    stack_.pop_back();
    return v;
  }

  // The values above the last MARK, which is removed.
  std::vector<Id> pop_to_mark() {
    if (marks_.empty()) fail("no MARK");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    if (mark > stack_.size()) fail("MARK below the stack");
    std::vector<Id> items(stack_.begin() + static_cast<long>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }

  Id top() {
    if (stack_.empty()) fail("empty stack");
    return stack_.back();
  }

  Kind kind(Id id) const { return out_.nodes_[id].kind; }

  void set_items(Id dict, const std::vector<Id>& items) {
    if (kind(dict) != Kind::kDict) fail("SETITEMS on something that is not a dict");
    if (items.size() % 2 != 0) fail("SETITEMS with an odd number of items");
    add_items(dict, items.data(), items.size());
  }

  void append(Id list, const Id* items, std::size_t n, const char* op) {
    if (kind(list) != Kind::kList) fail(std::string(op) + " to something that is not a list");
    add_items(list, items, n);
  }

  void memo_put(std::uint32_t id) {
    if (memo_.size() >= kMaxMemo) fail("memo too large");
    const Id value = top();
    const auto [it, added] = memo_.insert_or_assign(id, value);
    if (added) charge(kMemoEntryBytes);
  }

  Id memo_get(std::uint32_t id) {
    const auto it = memo_.find(id);
    if (it == memo_.end()) fail("BINGET of memo " + std::to_string(id) + " that was never put");
    return it->second;  // the value itself, shared: as Python's Unpickler
  }

  void tuple_of(std::size_t n) {
    const std::size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) fail("TUPLE" + std::to_string(n) + " on a short stack");
    const Id t = container_node(Kind::kTuple);
    add_items(t, stack_.data() + (stack_.size() - n), n);
    stack_.resize(stack_.size() - n);
    push(t);
  }

  // LONG1 of n bytes: a little-endian two's complement integer; Python writes the fewest bytes,
  // torch always 8.
  Id long1(std::size_t n) {
    if (n > 8) fail("LONG1 of " + std::to_string(n) + " bytes is beyond a 64-bit integer");
    if (in_.size() - pos_ < n) fail("truncated inside an argument");
    std::uint64_t bits = 0;
    for (std::size_t i = 0; i < n; ++i) {
      bits |= static_cast<std::uint64_t>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
    }
    if (n > 0 && n < 8 && (static_cast<unsigned char>(in_[pos_ + n - 1]) & 0x80) != 0) {
      bits |= ~std::uint64_t{0} << (8 * n);  // sign extension
    }
    pos_ += n;
    return node(Kind::kInt, bits);
  }

  void step(unsigned char op) {
    switch (op) {
      case kProto: {
        const auto version = static_cast<unsigned char>(byte());
        if (version != 2) fail("protocol " + std::to_string(version) + ", torch writes 2");
        return;
      }
      case kMark:
        if (marks_.size() >= kMaxStack) fail("too many MARKs");
        charge(kStackEntryBytes);
        marks_.push_back(stack_.size());
        return;
      case kNone:
        return push(node(Kind::kNone));
      case kNewTrue:
        return push(node(Kind::kBool, 1));
      case kNewFalse:
        return push(node(Kind::kBool, 0));
      case kBinInt1:
        return push(node(Kind::kInt, static_cast<std::uint8_t>(byte())));
      case kBinInt2:
        return push(node(Kind::kInt, little_endian<std::uint16_t>()));
      case kBinInt:
        return push(node(Kind::kInt, static_cast<std::uint64_t>(static_cast<std::int64_t>(
                                         little_endian<std::int32_t>()))));
      case kLong1:
        return push(long1(static_cast<unsigned char>(byte())));
      case kBinFloat: {
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(byte());
        return push(node(Kind::kFloat, bits));  // big-endian in the stream
      }
      case kBinUnicode: {
        const auto n = little_endian<std::uint32_t>();
        std::string text = bytes(n);
        // Python's Unpickler refuses such a string too; JSON (and snapshots) hold only UTF-8.
        if (valid_utf8(text) != text) fail("BINUNICODE string is not valid UTF-8");
        return push(string_node(Kind::kString, std::move(text)));
      }
      case kEmptyDict:
        return push(container_node(Kind::kDict));
      case kEmptyList:
        return push(container_node(Kind::kList));
      case kEmptyTuple:
        return push(container_node(Kind::kTuple));
      case kTuple1:
        return tuple_of(1);
      case kTuple2:
        return tuple_of(2);
      case kTuple3:
        return tuple_of(3);
      case kTuple: {
        const auto items = pop_to_mark();
        const Id t = container_node(Kind::kTuple);
        add_items(t, items.data(), items.size());
        return push(t);
      }
      case kAppend: {
        const Id item = pop();
        return append(top(), &item, 1, "APPEND");
      }
      case kAppends: {
        const auto items = pop_to_mark();
        return append(top(), items.data(), items.size(), "APPENDS");
      }
      case kSetItem: {
        const Id value = pop();
        const Id key = pop();
        return set_items(top(), {key, value});
      }
      case kSetItems: {
        // Sequenced: the items come off the stack before the dict under them is read (the
        // order of a call's arguments is unspecified; clang read top() first).
        const auto items = pop_to_mark();
        return set_items(top(), items);
      }
      case kBinPut:
        return memo_put(static_cast<unsigned char>(byte()));
      case kLongBinPut:
        return memo_put(little_endian<std::uint32_t>());
      case kBinGet:
        return push(memo_get(static_cast<unsigned char>(byte())));
      case kLongBinGet:
        return push(memo_get(little_endian<std::uint32_t>()));
      case kGlobal: {
        const std::string module = line();
        const std::string name = module + "." + line();
        if (!is_identity_global(name)) fail("GLOBAL " + name + " is not one torch writes for data");
        return push(string_node(Kind::kGlobal, name));
      }
      case kReduce: {
        const Id args = pop();
        const Id callable = pop();
        if (kind(callable) != Kind::kGlobal || kind(args) != Kind::kTuple ||
            items_of(args).empty()) {
          fail("REDUCE of something that is not a type tag or specialised list");
        }
        return push(items_of(args).front());
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("opcode ") + hex +
             " is not one torch's Pickler writes for plain data; refused");
      }
    }
  }

  const std::string& in_;
  const PickleLimits& limits_;
  std::size_t pos_ = 0;
  std::size_t op_at_ = 0;
  Pickle out_;
  std::vector<Id> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint32_t, Id> memo_;
};

std::int64_t Pickle::integer(Id id) const {
  return static_cast<std::int64_t>(nodes_[id].bits);
}

double Pickle::real(Id id) const {
  double value = 0;
  std::memcpy(&value, &nodes_[id].bits, sizeof value);
  return value;
}

Pickle decode_torch_pickle(const std::string& bytes, const PickleLimits& limits) {
  return Unpickler(bytes, limits).run();
}

void PickleExpander::count_value() {
  if (++values_ > limits_.max_expanded_values) {
    throw Error("pickle: more than " + std::to_string(limits_.max_expanded_values) +
                " values to expand (a value shared through the memo counts once per reference: "
                "a memo bomb); refused");
  }
}

void PickleExpander::count_bytes(std::size_t n) {
  bytes_ += n;
  if (bytes_ > limits_.max_expanded_bytes) {
    throw Error("pickle: more than " + std::to_string(limits_.max_expanded_bytes >> 20) +
                " MiB of strings to expand (a string shared through the memo counts once per "
                "reference); refused");
  }
}

nlohmann::json PickleExpander::to_json(Pickle::Id id, const JsonKeep& keep) {
  std::vector<std::string> path;
  return expand(id, keep, path);
}

nlohmann::json PickleExpander::expand(Pickle::Id id, const JsonKeep& keep,
                                      std::vector<std::string>& path) {
  using Kind = Pickle::Kind;
  count_value();
  switch (pickle_.kind(id)) {
    case Kind::kNone:
      return nullptr;
    case Kind::kBool:
      return pickle_.boolean(id);
    case Kind::kInt:
      return pickle_.integer(id);
    case Kind::kFloat:
      return pickle_.real(id);
    case Kind::kString:
      count_bytes(pickle_.text(id).size());
      return pickle_.text(id);
    case Kind::kGlobal:
      count_bytes(pickle_.text(id).size());
      return json{{"__global__", pickle_.text(id)}};
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kDict:
      break;
  }
  if (path.size() + 1 > limits_.max_depth) {
    throw Error("pickle: nested deeper than " + std::to_string(limits_.max_depth) +
                " levels (or a value that contains itself); refused");
  }
  const auto& items = pickle_.items(id);
  if (pickle_.kind(id) != Kind::kDict) {
    json out = json::array();
    path.emplace_back("*");
    for (const auto item : items) out.push_back(expand(item, keep, path));
    path.pop_back();
    return out;
  }
  json out = json::object();
  path.emplace_back();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    const auto key = items[i];
    if (pickle_.kind(key) == Kind::kString) {
      path.back() = pickle_.text(key);
    } else {
      path.back() = expand(key, {}, path).dump();
    }
    if (keep && !keep(path)) {
      count_value();  // looked at, not expanded
      continue;
    }
    count_bytes(path.back().size());
    // The last of equal keys wins, as in a Python dict.
    std::string name = path.back();
    out[name] = expand(items[i + 1], keep, path);
  }
  path.pop_back();
  return out;
}

nlohmann::json unpickle_torch(const std::string& bytes, const PickleLimits& limits) {
  try {
    const Pickle pickle = decode_torch_pickle(bytes, limits);
    return PickleExpander(pickle, limits).to_json(pickle.root());
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error("pickle: out of memory while decoding " + std::to_string(bytes.size()) +
                " bytes; refused");
  } catch (const std::exception& e) {  // a value the JSON model refuses (invalid UTF-8, …)
    throw Error(std::string("malformed pickle: ") + e.what());
  }
}

}  // namespace hangscope::collectives
