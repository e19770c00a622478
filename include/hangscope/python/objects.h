// Typed, bounds-checked reads of CPython objects in another process: pointers, str, bytes,
// type names, and short reprs of simple values (for --locals).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hangscope/memory/memory_reader.h"
#include "hangscope/proc/maps.h"
#include "hangscope/python/layout.h"

namespace hangscope::python {

class ObjectReader {
 public:
  ObjectReader(memory::MemoryReader& memory, const proc::MemoryMap& maps, const Layout& layout)
      : memory_(memory), maps_(maps), layout_(layout) {}

  const Layout& layout() const { return layout_; }

  // True when address is 8-aligned and inside a readable mapping.
  bool plausible(std::uint64_t address) const;
  std::optional<std::uint64_t> pointer_at(std::uint64_t address);
  bool read(std::uint64_t address, void* out, std::size_t size);
  // A field of the object at `object`, of the type its offset names (nullopt when unreadable).
  template <typename T>
  std::optional<T> read_field(std::uint64_t object, FieldOffset<T> field) {
    if (field.in(object) == 0) return std::nullopt;
    return memory_.read_field(object, field);
  }

  // A str object as UTF-8 (ASCII, Latin-1, UCS-2, UCS-4), cut to max_chars code points.
  std::optional<std::string> string(std::uint64_t object, std::size_t max_chars = 1024);
  // A bytes object's contents, cut to max_bytes.
  std::optional<std::string> bytes(std::uint64_t object, std::size_t max_bytes = 1 << 20);
  // The type's tp_name ("code", "str", "int", ...), cached per type.
  std::optional<std::string> type_name(std::uint64_t object);
  // Number of items of a tuple (PyVarObject.ob_size).
  std::optional<std::int64_t> var_size(std::uint64_t object);
  std::optional<std::uint64_t> tuple_item(std::uint64_t tuple, std::int64_t index);

  // An int object's value when it fits 64 bits.
  std::optional<std::uint64_t> int_value(std::uint64_t object);

  // Entries of a dict (key, value), in insertion order, at most max_items.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> dict_items(std::uint64_t dict,
                                                                  std::size_t max_items = 4096);
  // Which of `candidates` the object is, when it is a compact ASCII str equal to one of them
  // (shorter than 128 bytes); read in one piece, for scans over thousands of keys (sys.modules).
  std::optional<std::size_t> ascii_key_index(std::uint64_t object,
                                             const std::vector<std::string_view>& candidates);
  // ascii_key_index of the key of each of `items` (a dict's), the keys read together in one
  // batch: sys.modules' 1,500 keys in one system call instead of one for each page they are on.
  std::vector<std::optional<std::size_t>> ascii_key_indexes(
      const std::vector<std::pair<std::uint64_t, std::uint64_t>>& items,
      const std::vector<std::string_view>& candidates);
  // The module objects of sys.modules (of the main interpreter, runtime at `runtime_address`)
  // named in `names`, by name: one walk of sys.modules, its keys read in one batch.
  std::map<std::string, std::uint64_t> find_modules(std::uint64_t runtime_address,
                                                    const std::vector<std::string_view>& names);
  // The value of a dict under a str key.
  std::optional<std::uint64_t> dict_get(std::uint64_t dict, std::string_view key);
  // An instance attribute (from its __dict__ or its managed/inline values).
  std::optional<std::uint64_t> attribute(std::uint64_t object, std::string_view name);
  // Every instance attribute (name object, value), at most max_items.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> attributes(std::uint64_t object,
                                                                  std::size_t max_items = 256);

  // A class attribute, from the class's own tp_dict (not its bases'): `GroupMember.WORLD`.
  std::optional<std::uint64_t> class_attribute(std::uint64_t type, std::string_view name);
  // The items of a list or tuple, at most max_items; nullopt for any other object.
  std::optional<std::vector<std::uint64_t>> sequence_items(std::uint64_t object,
                                                           std::size_t max_items = 4096);
  // An int object's value when it fits an int (ranks, sizes); nullopt for anything else.
  std::optional<int> small_int(std::uint64_t object);

  // Objects the caller recognised (process groups): repr() shows them by these labels.
  void set_labels(const std::map<std::uint64_t, std::string>* labels) { labels_ = labels; }

  // A short Python-like repr of simple values (int, float, bool, None, str, bytes, small
  // tuples and lists of them); any other object is shown as <type name>.
  std::string repr(std::uint64_t object, int depth = 2);

 private:
  std::optional<std::string> int_repr(std::uint64_t object);
  // ascii_key_index's test of a key's first `got` bytes (its header and text).
  std::optional<std::size_t> ascii_key_in(std::uint64_t object, std::span<const std::uint8_t> raw,
                                          const std::vector<std::string_view>& candidates,
                                          std::size_t longest);
  // Keys table entries: (key, value-or-index) pairs; values of split tables come from `values`.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> keys_entries(std::uint64_t keys,
                                                                    std::uint64_t values,
                                                                    std::size_t max_items);

  memory::MemoryReader& memory_;
  const proc::MemoryMap& maps_;
  const Layout& layout_;
  std::map<std::uint64_t, std::string> type_names_;
  std::optional<std::uint64_t> str_type_;  // address of `str`, learnt by ascii_key_index
  const std::map<std::uint64_t, std::string>* labels_ = nullptr;
};

// Appends code point cp to out as UTF-8 (invalid code points become U+FFFD).
void append_utf8(std::string& out, std::uint32_t cp);

}  // namespace hangscope::python
