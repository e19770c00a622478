// Inputs that cost far more to read than their size (issue 30, "amplification"), built byte by
// byte so the unit, integration and fuzz tiers share them.
#pragma once

#include <cstddef>
#include <string>

namespace hangscope::testing {

// A flight-recorder pickle (protocol 2, as torch's Pickler writes) whose `entries` is a memo
// bomb: list 0 holds one int; each of `levels` lists holds `references` BINGETs of the list
// before it. Six levels of 1,000: 12 KB that expand to 1,000^6 values.
std::string memo_bomb_pickle(int levels = 6, int references = 1000);

// A flight-recorder JSON dump whose first entry's input_sizes nests `levels` arrays deep.
std::string deep_json_dump(std::size_t levels);

}  // namespace hangscope::testing
