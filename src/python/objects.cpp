#include "hangscope/python/objects.h"

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <span>

namespace hangscope::python {

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool ObjectReader::plausible(std::uint64_t address) const {
  if (address == 0 || (address & 7) != 0) return false;
  const proc::Mapping* mapping = maps_.find(address);
  return mapping != nullptr && mapping->readable;
}

bool ObjectReader::read(std::uint64_t address, void* out, std::size_t size) {
  return address != 0 && memory_.read_exact(address, out, size);
}

std::optional<std::uint64_t> ObjectReader::pointer_at(std::uint64_t address) {
  std::uint64_t value = 0;
  if (!read(address, &value, sizeof value)) return std::nullopt;
  return value;
}

std::optional<std::string> ObjectReader::type_name(std::uint64_t object) {
  if (!plausible(object)) return std::nullopt;
  const auto type = read_field(object, layout_.object_type);
  if (!type || !plausible(*type)) return std::nullopt;
  if (const auto it = type_names_.find(*type); it != type_names_.end()) return it->second;
  const auto name_ptr = read_field(*type, layout_.type_name);
  if (!name_ptr || *name_ptr == 0) return std::nullopt;
  char buffer[128] = {};
  const std::size_t n = memory_.read(*name_ptr, buffer, sizeof buffer - 1);
  if (n == 0) return std::nullopt;
  std::string name(buffer, strnlen(buffer, n));
  type_names_.emplace(*type, name);
  return name;
}

std::optional<std::int64_t> ObjectReader::var_size(std::uint64_t object) {
  const auto size = read_field(object, layout_.var_size);
  if (!size || *size < 0) return std::nullopt;
  return size;
}

std::optional<std::uint64_t> ObjectReader::tuple_item(std::uint64_t tuple, std::int64_t index) {
  return pointer_at(layout_.tuple_items.item(tuple, static_cast<std::uint64_t>(index)));
}

std::optional<std::string> ObjectReader::string(std::uint64_t object, std::size_t max_chars) {
  // The type is checked first: a damaged pointer to another object is not read as text.
  if (!plausible(object) || type_name(object) != "str") return std::nullopt;
  const auto length = read_field(object, layout_.unicode_length);
  const auto state = read_field(object, layout_.unicode_state);
  if (!length || !state || *length < 0) return std::nullopt;
  const UnicodeStateBits& bits = layout_.unicode_state_bits;
  const unsigned kind = bits.kind(*state);
  if (kind != 1 && kind != 2 && kind != 4) return std::nullopt;  // legacy, not-ready string
  std::uint64_t data = 0;
  if (bits.compact(*state)) {
    data =
        object + (bits.ascii(*state) ? layout_.unicode_ascii_data : layout_.unicode_compact_data);
  } else {
    const auto pointer = read_field(object, layout_.unicode_legacy_data);
    if (!pointer) return std::nullopt;
    data = *pointer;
  }
  const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(*length), max_chars);
  std::vector<std::uint8_t> raw(count * kind);
  if (!raw.empty() && !read(data, raw.data(), raw.size())) return std::nullopt;
  std::string out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t cp = 0;
    std::memcpy(&cp, raw.data() + i * kind, kind);  // little-endian
    append_utf8(out, cp);
  }
  if (count < static_cast<std::size_t>(*length)) out += "…";
  return out;
}

namespace {

constexpr std::size_t kMaxKey = 128;

std::size_t longest_of(const std::vector<std::string_view>& candidates) {
  std::size_t longest = 0;
  for (const auto c : candidates) longest = std::max(longest, c.size());
  return longest;
}

}  // namespace

std::optional<std::size_t> ObjectReader::ascii_key_in(
    std::uint64_t object, std::span<const std::uint8_t> raw,
    const std::vector<std::string_view>& candidates, std::size_t longest) {
  const std::uint64_t header = layout_.unicode_ascii_data;
  if (raw.size() < header) return std::nullopt;
  // The fields are in the header (not in the text after it).
  const auto head = raw.first(header);
  const auto type = memory::field_in(head, layout_.object_type);
  const auto length = memory::field_in(head, layout_.unicode_length);
  const auto state = memory::field_in(head, layout_.unicode_state);
  if (!type || !length || !state) return std::nullopt;
  const UnicodeStateBits& bits = layout_.unicode_state_bits;
  const bool compact_ascii = bits.kind(*state) == 1 && bits.compact(*state) && bits.ascii(*state);
  if (!compact_ascii || *length <= 0 || static_cast<std::size_t>(*length) > longest ||
      raw.size() < header + static_cast<std::size_t>(*length)) {
    return std::nullopt;
  }
  if (str_type_ ? *type != *str_type_ : type_name(object) != "str") return std::nullopt;
  str_type_ = *type;
  const std::string_view text(reinterpret_cast<const char*>(raw.data() + header),
                              static_cast<std::size_t>(*length));
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i] == text) return i;
  }
  return std::nullopt;
}

std::optional<std::size_t> ObjectReader::ascii_key_index(
    std::uint64_t object, const std::vector<std::string_view>& candidates) {
  const std::size_t longest = longest_of(candidates);
  const std::uint64_t header = layout_.unicode_ascii_data;
  if (!plausible(object) || header == 0 || header > 256 || longest > kMaxKey) return std::nullopt;
  std::uint8_t raw[256 + kMaxKey] = {};
  // A prefix is enough: a key shorter than the longest candidate may end before a mapping does.
  const std::size_t got = memory_.read(object, raw, header + longest);
  return ascii_key_in(object, std::span<const std::uint8_t>(raw, got), candidates, longest);
}

std::vector<std::optional<std::size_t>> ObjectReader::ascii_key_indexes(
    const std::vector<std::pair<std::uint64_t, std::uint64_t>>& items,
    const std::vector<std::string_view>& candidates) {
  std::vector<std::optional<std::size_t>> out(items.size());
  const std::size_t longest = longest_of(candidates);
  const std::uint64_t header = layout_.unicode_ascii_data;
  if (header == 0 || header > 256 || longest > kMaxKey) return out;
  const std::size_t each = header + longest;
  std::vector<std::uint8_t> raw(items.size() * each);
  std::vector<memory::ReadRequest> requests;
  std::vector<std::size_t> item_of;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!plausible(items[i].first)) continue;
    requests.push_back({items[i].first, raw.data() + i * each, each, 0});
    item_of.push_back(i);
  }
  memory_.read_many(requests);
  for (std::size_t j = 0; j < requests.size(); ++j) {
    const std::size_t i = item_of[j];
    out[i] = ascii_key_in(items[i].first,
                          std::span<const std::uint8_t>(raw.data() + i * each, requests[j].copied),
                          candidates, longest);
  }
  return out;
}

std::optional<std::string> ObjectReader::bytes(std::uint64_t object, std::size_t max_bytes) {
  if (type_name(object) != "bytes") return std::nullopt;
  const auto size = var_size(object);
  if (!size) return std::nullopt;
  std::string out(std::min<std::size_t>(static_cast<std::size_t>(*size), max_bytes), '\0');
  if (!out.empty() && !read(layout_.bytes_data.in(object), out.data(), out.size())) {
    return std::nullopt;
  }
  return out;
}

std::optional<std::string> ObjectReader::int_repr(std::uint64_t object) {
  const auto size_or_tag = read_field(object, layout_.var_size);
  if (!size_or_tag) return std::nullopt;
  const std::int64_t tag = *size_or_tag;
  std::uint64_t digits = 0;
  bool negative = false;
  switch (layout_.long_format) {
    case LongFormat::kTagged: {
      const auto bits = static_cast<std::uint64_t>(tag);
      digits = bits >> 3;
      negative = (bits & 3) == 2;
      if ((bits & 3) == 1) return "0";
      break;
    }
    case LongFormat::kSignedSize:
      negative = tag < 0;
      digits = static_cast<std::uint64_t>(negative ? -tag : tag);
      break;
  }
  if (digits == 0) return "0";
  if (digits > 2) return std::string("<int with ") + std::to_string(digits * 30) + " bits>";
  std::uint32_t d[2] = {0, 0};
  static_assert(sizeof d[0] == sizeof(decltype(Layout::long_digits)::type));
  if (!read(layout_.long_digits.in(object), d, digits * sizeof d[0])) return std::nullopt;
  const std::uint64_t value = d[0] | (static_cast<std::uint64_t>(d[1]) << 30);
  return (negative ? "-" : "") + std::to_string(value);
}

std::optional<std::uint64_t> ObjectReader::int_value(std::uint64_t object) {
  const auto text = int_repr(object);
  if (!text || text->empty() || (*text)[0] == '-' || (*text)[0] == '<') return std::nullopt;
  return std::stoull(*text);
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> ObjectReader::keys_entries(
    std::uint64_t keys, std::uint64_t values, std::size_t max_items) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> items;
  // The header, everything before dk_indices, in one read.
  std::uint8_t raw_header[64];
  const std::uint64_t header_size = layout_.keys_indices.offset;
  if (header_size > sizeof raw_header || !read(keys, raw_header, header_size)) return items;
  const std::span<const std::uint8_t> header(raw_header, header_size);
  const auto nentries = memory::field_in(header, layout_.keys_nentries);
  if (!nentries || *nentries < 0) return items;
  std::uint64_t entries = 0;
  std::uint64_t entry_size = layout_.key_entry_size;
  std::uint64_t key_at = layout_.key_entry_key.offset;
  std::uint64_t value_at = layout_.key_entry_value.offset;
  switch (layout_.dict_keys_format) {
    case DictKeysFormat::k310: {
      const auto size = memory::field_in(header, *layout_.keys_size);
      if (!size || *size <= 0 || *size > (1 << 26)) return items;
      const auto n = static_cast<std::uint64_t>(*size);
      const std::uint64_t width = n <= 0xff ? 1 : n <= 0xffff ? 2 : n <= 0xffffffff ? 4 : 8;
      entries = layout_.keys_indices.in(keys) + n * width;
      break;
    }
    case DictKeysFormat::k311: {
      const auto index_bytes = memory::field_in(header, *layout_.keys_log2_index_bytes);
      const auto kind = memory::field_in(header, *layout_.keys_kind);
      if (!index_bytes || !kind || *index_bytes > 40) return items;
      entries = layout_.keys_indices.in(keys) + (std::uint64_t{1} << *index_bytes);
      if (*kind != 0) {  // unicode keys: {key, value}
        entry_size = layout_.unicode_entry_size;
        key_at = layout_.unicode_entry_key.offset;
        value_at = layout_.unicode_entry_value.offset;
      }
      break;
    }
  }
  std::uint64_t count = static_cast<std::uint64_t>(*nentries);
  count = std::min<std::uint64_t>(count, max_items);
  std::vector<std::uint64_t> raw(count * entry_size / 8);
  if (raw.empty() || !read(entries, raw.data(), raw.size() * 8)) return items;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t key = raw[(i * entry_size + key_at) / 8];
    std::uint64_t value = raw[(i * entry_size + value_at) / 8];
    if (values != 0) {
      value = pointer_at(layout_.dict_values_items.item(values, i)).value_or(0);
    }
    if (key != 0 && value != 0) items.emplace_back(key, value);
  }
  return items;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> ObjectReader::dict_items(
    std::uint64_t dict, std::size_t max_items) {
  const auto keys = read_field(dict, layout_.dict_keys);
  const auto values = read_field(dict, layout_.dict_values);
  if (!keys || !plausible(*keys)) return {};
  return keys_entries(*keys, values.value_or(0), max_items);
}

std::map<std::string, std::uint64_t> ObjectReader::find_modules(
    std::uint64_t runtime_address, const std::vector<std::string_view>& names) {
  std::map<std::string, std::uint64_t> found;
  const auto interp = read_field(runtime_address, layout_.runtime_interpreters_head);
  if (!interp || !plausible(*interp)) return found;
  const auto modules = read_field(*interp, layout_.interp_modules);
  if (!modules || !plausible(*modules)) return found;
  const auto items = dict_items(*modules, 1 << 16);
  const auto index = ascii_key_indexes(items, names);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (index[i]) found.emplace(names[*index[i]], items[i].second);
  }
  return found;
}

std::optional<std::uint64_t> ObjectReader::dict_get(std::uint64_t dict, std::string_view key) {
  for (const auto& [k, v] : dict_items(dict)) {
    if (string(k, key.size() + 1) == key) return v;
  }
  return std::nullopt;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> ObjectReader::attributes(
    std::uint64_t object, std::size_t max_items) {
  const auto type = read_field(object, layout_.object_type);
  if (!type || !plausible(*type)) return {};
  const std::uint64_t flags = read_field(*type, layout_.type_flags).value_or(0);
  constexpr std::uint64_t kManagedDict = 1u << 4, kInlineValues = 1u << 2;
  const auto from_values = [&](std::uint64_t values) {
    const auto keys = read_field(*type, layout_.heap_type_cached_keys);
    if (!keys || !plausible(*keys)) return std::vector<std::pair<std::uint64_t, std::uint64_t>>{};
    return keys_entries(*keys, values, max_items);
  };
  std::optional<std::uint64_t> dict;
  switch (layout_.managed_dict) {
    case Layout::ManagedDict::kNone: {
      const auto offset = read_field(*type, layout_.type_dictoffset);
      if (offset && *offset > 0) dict = pointer_at(object + static_cast<std::uint64_t>(*offset));
      break;
    }
    case Layout::ManagedDict::kValuesAtMinus4:
      if (!(flags & kManagedDict)) return {};
      dict = pointer_at(object - 24);
      if (!dict || *dict == 0) {
        const auto values = pointer_at(object - 32);
        if (!values || *values == 0) return {};
        return from_values(*values);
      }
      break;
    case Layout::ManagedDict::kTaggedAtMinus3: {
      if (!(flags & kManagedDict)) return {};
      const auto tagged = pointer_at(object - 24);
      if (!tagged || *tagged == 0) return {};
      if (*tagged & 1) return from_values(*tagged + 1);  // stored as values - 1
      dict = tagged;
      break;
    }
    case Layout::ManagedDict::kInlineValues: {
      if (!(flags & kManagedDict)) return {};
      dict = pointer_at(object - 24);
      if ((!dict || *dict == 0) && (flags & kInlineValues)) {
        const auto basic_size = read_field(*type, layout_.type_basicsize);
        if (!basic_size || *basic_size <= 0) return {};
        const std::uint64_t values = object + static_cast<std::uint64_t>(*basic_size);
        const auto valid = read_field(values, *layout_.dict_values_valid);
        if (!valid || !*valid) return {};
        return from_values(values);
      }
      break;
    }
  }
  if (!dict || *dict == 0) return {};
  return dict_items(*dict, max_items);
}

std::optional<std::uint64_t> ObjectReader::attribute(std::uint64_t object, std::string_view name) {
  for (const auto& [key, value] : attributes(object, 256)) {
    if (string(key, name.size() + 1) == name) return value;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> ObjectReader::class_attribute(std::uint64_t type,
                                                           std::string_view name) {
  if (!plausible(type)) return std::nullopt;
  const auto dict = read_field(type, layout_.type_dict);
  if (!dict || !plausible(*dict) || type_name(*dict) != "dict") return std::nullopt;
  return dict_get(*dict, name);
}

std::optional<std::vector<std::uint64_t>> ObjectReader::sequence_items(std::uint64_t object,
                                                                       std::size_t max_items) {
  const auto type = type_name(object);
  if (type != "list" && type != "tuple") return std::nullopt;
  const auto size = var_size(object);
  if (!size) return std::nullopt;
  const auto items = *type == "tuple" ? std::optional<std::uint64_t>(layout_.tuple_items.in(object))
                                      : read_field(object, layout_.list_items);
  if (!items) return std::nullopt;
  const auto count = std::min<std::uint64_t>(static_cast<std::uint64_t>(*size), max_items);
  std::vector<RemoteAddress> out(count);
  if (count > 0 && !read(*items, out.data(), count * sizeof(RemoteAddress))) return std::nullopt;
  return out;
}

std::optional<int> ObjectReader::small_int(std::uint64_t object) {
  if (type_name(object) != "int") return std::nullopt;
  const auto text = int_repr(object);
  if (!text || text->empty() || text->size() > 10) return std::nullopt;
  long long value = 0;
  for (std::size_t i = (*text)[0] == '-' ? 1 : 0; i < text->size(); ++i) {
    if ((*text)[i] < '0' || (*text)[i] > '9') return std::nullopt;
    value = value * 10 + ((*text)[i] - '0');
  }
  if ((*text)[0] == '-') value = -value;
  if (value < INT32_MIN || value > INT32_MAX) return std::nullopt;
  return static_cast<int>(value);
}

std::string ObjectReader::repr(std::uint64_t object, int depth) {
  if (object == 0) return "<NULL>";
  if (labels_ != nullptr) {
    if (const auto it = labels_->find(object); it != labels_->end()) return it->second;
  }
  const auto type = type_name(object);
  if (!type) return "<unreadable>";
  if (*type == "NoneType") return "None";
  if (*type == "bool") {
    const auto value = int_repr(object);
    return value && *value != "0" ? "True" : "False";
  }
  if (*type == "int") return int_repr(object).value_or("<int>");
  if (*type == "float") {
    const auto value = read_field(object, layout_.float_value);
    if (!value) return "<float>";
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.17g", *value);
    return buffer;
  }
  if (*type == "str") {
    const auto text = string(object, 256);
    return text ? "'" + *text + "'" : "<str>";
  }
  if (*type == "bytes") {
    const auto data = bytes(object, 64);
    if (!data) return "<bytes>";
    std::string out = "b'";
    for (unsigned char c : *data) {
      if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
        out += static_cast<char>(c);
      } else {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        out += hex;
      }
    }
    return out + "'";
  }
  if ((*type == "tuple" || *type == "list") && depth > 0) {
    const auto size = var_size(object);
    if (!size) return "<" + *type + ">";
    const bool tuple = *type == "tuple";
    std::optional<std::uint64_t> items =
        tuple ? std::optional<std::uint64_t>(layout_.tuple_items.in(object))
              : read_field(object, layout_.list_items);
    if (!items) return "<" + *type + ">";
    std::string out = tuple ? "(" : "[";
    const std::int64_t shown = std::min<std::int64_t>(*size, 8);
    for (std::int64_t i = 0; i < shown; ++i) {
      if (i) out += ", ";
      const auto item = pointer_at(*items + static_cast<std::uint64_t>(i) * sizeof(RemoteAddress));
      out += item ? repr(*item, depth - 1) : "<unreadable>";
    }
    if (*size > shown) out += ", …";
    if (tuple && *size == 1) out += ",";
    return out + (tuple ? ")" : "]");
  }
  return "<" + *type + ">";
}

}  // namespace hangscope::python
