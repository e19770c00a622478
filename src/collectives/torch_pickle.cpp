#include "hangscope/collectives/torch_pickle.h"

#include <cstdint>
#include <cstring>
#include <map>
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

class Unpickler {
 public:
  explicit Unpickler(const std::string& bytes) : in_(bytes) {}

  json run() {
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
    return std::move(stack_.back());
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error("pickle offset " + std::to_string(op_at_) + ": " + why);
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

  void push(json value) {
    if (stack_.size() >= kMaxStack) fail("stack too deep");
    stack_.push_back(std::move(value));
  }

  json pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("pop from an empty stack");
    json v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }

  // The values above the last MARK, which is removed.
  std::vector<json> pop_to_mark() {
    if (marks_.empty()) fail("no MARK");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    if (mark > stack_.size()) fail("MARK below the stack");
    std::vector<json> items(std::make_move_iterator(stack_.begin() + static_cast<long>(mark)),
                            std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }

  json& top() {
    if (stack_.empty()) fail("empty stack");
    return stack_.back();
  }

  static std::string key_text(const json& key) {
    return key.is_string() ? key.get<std::string>() : key.dump();
  }

  void set_items(json& dict, std::vector<json>& items) {
    if (!dict.is_object()) fail("SETITEMS on something that is not a dict");
    if (items.size() % 2 != 0) fail("SETITEMS with an odd number of items");
    for (std::size_t i = 0; i < items.size(); i += 2) {
      dict[key_text(items[i])] = std::move(items[i + 1]);
    }
  }

  void memo_put(std::uint32_t id) {
    if (memo_.size() >= kMaxMemo) fail("memo too large");
    memo_[id] = top();
  }

  json memo_get(std::uint32_t id) {
    const auto it = memo_.find(id);
    if (it == memo_.end()) fail("BINGET of memo " + std::to_string(id) + " that was never put");
    return it->second;
  }

  void tuple_of(std::size_t n) {
    const std::size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) fail("TUPLE" + std::to_string(n) + " on a short stack");
    json t = json::array();
    for (std::size_t i = stack_.size() - n; i < stack_.size(); ++i) t.push_back(stack_[i]);
    stack_.resize(stack_.size() - n);
    push(std::move(t));
  }

  void step(unsigned char op) {
    switch (op) {
      case kProto: {
        const auto version = static_cast<unsigned char>(byte());
        if (version != 2) fail("protocol " + std::to_string(version) + ", torch writes 2");
        return;
      }
      case kMark:
        marks_.push_back(stack_.size());
        return;
      case kNone:
        return push(nullptr);
      case kNewTrue:
        return push(true);
      case kNewFalse:
        return push(false);
      case kBinInt1:
        return push(static_cast<std::uint8_t>(byte()));
      case kBinInt2:
        return push(little_endian<std::uint16_t>());
      case kBinInt:
        return push(little_endian<std::int32_t>());
      case kLong1: {
        const auto n = static_cast<unsigned char>(byte());
        if (n != 8) fail("LONG1 of " + std::to_string(n) + " bytes, torch writes 8");
        return push(little_endian<std::int64_t>());
      }
      case kBinFloat: {
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(byte());
        double value = 0;
        std::memcpy(&value, &bits, sizeof value);  // big-endian in the stream
        return push(value);
      }
      case kBinUnicode: {
        const auto n = little_endian<std::uint32_t>();
        std::string text = bytes(n);
        // Python's Unpickler refuses such a string too; JSON (and snapshots) hold only UTF-8.
        if (valid_utf8(text) != text) fail("BINUNICODE string is not valid UTF-8");
        return push(std::move(text));
      }
      case kEmptyDict:
        return push(json::object());
      case kEmptyList:
        return push(json::array());
      case kEmptyTuple:
        return push(json::array());
      case kTuple1:
        return tuple_of(1);
      case kTuple2:
        return tuple_of(2);
      case kTuple3:
        return tuple_of(3);
      case kTuple: {
        auto items = pop_to_mark();
        json t = json::array();
        for (auto& i : items) t.push_back(std::move(i));
        return push(std::move(t));
      }
      case kAppend: {
        json item = pop();
        if (!top().is_array()) fail("APPEND to something that is not a list");
        top().push_back(std::move(item));
        return;
      }
      case kAppends: {
        auto items = pop_to_mark();
        if (!top().is_array()) fail("APPENDS to something that is not a list");
        for (auto& i : items) top().push_back(std::move(i));
        return;
      }
      case kSetItem: {
        json value = pop();
        json key = pop();
        std::vector<json> items = {std::move(key), std::move(value)};
        return set_items(top(), items);
      }
      case kSetItems: {
        auto items = pop_to_mark();
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
        return push(json{{"__global__", name}});
      }
      case kReduce: {
        json args = pop();
        json callable = pop();
        if (!callable.is_object() || !callable.contains("__global__") || !args.is_array() ||
            args.empty()) {
          fail("REDUCE of something that is not a type tag or specialised list");
        }
        return push(std::move(args[0]));
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
  std::size_t pos_ = 0;
  std::size_t op_at_ = 0;
  std::vector<json> stack_;
  std::vector<std::size_t> marks_;
  std::map<std::uint32_t, json> memo_;
};

}  // namespace

nlohmann::json unpickle_torch(const std::string& bytes) {
  try {
    return Unpickler(bytes).run();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // a value the JSON model refuses (invalid UTF-8, …)
    throw Error(std::string("malformed pickle: ") + e.what());
  }
}

}  // namespace hangscope::collectives
