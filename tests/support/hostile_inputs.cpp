#include "hostile_inputs.h"

#include <cstdint>

namespace hangscope::testing {
namespace {

void binunicode(std::string& out, const std::string& text) {
  out += 'X';
  const auto n = static_cast<std::uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  out += text;
}

}  // namespace

std::string memo_bomb_pickle(int levels, int references) {
  // {"version": "2.4", "l0": [7], "l1": [l0] * N, ..., "entries": [l(levels-1)] * N}: each list
  // is a member of the dump (torch's Pickler has no POP), memoised as torch's Pickler does it,
  // once it is complete (BINPUT after APPENDS: a reader that copies memo values copies it
  // whole), and got by BINGET.
  std::string p = "\x80\x02}(";  // PROTO 2, EMPTY_DICT, MARK
  binunicode(p, "version");
  binunicode(p, "2.4");
  binunicode(p, "l0");
  p += "]K\x07"
       "aq";  // EMPTY_LIST, BININT1 7, APPEND, BINPUT 0
  p += '\0';
  for (int level = 1; level <= levels; ++level) {
    binunicode(p, level == levels ? "entries" : "l" + std::to_string(level));
    p += "](";  // EMPTY_LIST, MARK
    for (int r = 0; r < references; ++r) {
      p += 'h';  // BINGET level - 1
      p += static_cast<char>(level - 1);
    }
    p += "eq";  // APPENDS, BINPUT level
    p += static_cast<char>(level);
  }
  p += "u.";  // SETITEMS, STOP
  return p;
}

std::string deep_json_dump(std::size_t levels) {
  std::string j = R"({"version": "2.4", "entries": [{"pg_id": 0, "collective_seq_id": 1, )"
                  R"("input_sizes": )";
  j.append(levels, '[');
  j.append(levels, ']');
  j += "}]}";
  return j;
}

}  // namespace hangscope::testing
