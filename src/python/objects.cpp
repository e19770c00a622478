#include "hangscope/python/objects.h"

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>

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
  const auto type = pointer_at(object + layout_.object_type);
  if (!type || !plausible(*type)) return std::nullopt;
  if (const auto it = type_names_.find(*type); it != type_names_.end()) return it->second;
  const auto name_ptr = pointer_at(*type + layout_.type_name);
  if (!name_ptr || *name_ptr == 0) return std::nullopt;
  char buffer[128] = {};
  const std::size_t n = memory_.read(*name_ptr, buffer, sizeof buffer - 1);
  if (n == 0) return std::nullopt;
  std::string name(buffer, strnlen(buffer, n));
  type_names_.emplace(*type, name);
  return name;
}

std::optional<std::int64_t> ObjectReader::var_size(std::uint64_t object) {
  std::int64_t size = 0;
  if (!read(object + layout_.var_size, &size, sizeof size) || size < 0) return std::nullopt;
  return size;
}

std::optional<std::uint64_t> ObjectReader::tuple_item(std::uint64_t tuple, std::int64_t index) {
  return pointer_at(tuple + layout_.tuple_items + static_cast<std::uint64_t>(index) * 8);
}

std::optional<std::string> ObjectReader::string(std::uint64_t object, std::size_t max_chars) {
  // The type is checked first: a damaged pointer to another object is not read as text.
  if (!plausible(object) || type_name(object) != "str") return std::nullopt;
  std::int64_t length = 0;
  std::uint32_t state = 0;
  if (!read(object + layout_.unicode_length, &length, sizeof length) ||
      !read(object + layout_.unicode_state, &state, sizeof state) || length < 0) {
    return std::nullopt;
  }
  const unsigned kind = (state >> 2) & 7u;
  const bool compact = (state >> 5) & 1u;
  const bool ascii = (state >> 6) & 1u;
  if (kind != 1 && kind != 2 && kind != 4) return std::nullopt;  // legacy, not-ready string
  std::uint64_t data = 0;
  if (compact) {
    data = object + (ascii ? layout_.unicode_ascii_data : layout_.unicode_compact_data);
  } else {
    const auto pointer = pointer_at(object + layout_.unicode_legacy_data);
    if (!pointer) return std::nullopt;
    data = *pointer;
  }
  const std::size_t count = std::min<std::size_t>(static_cast<std::size_t>(length), max_chars);
  std::vector<std::uint8_t> raw(count * kind);
  if (!raw.empty() && !read(data, raw.data(), raw.size())) return std::nullopt;
  std::string out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t cp = 0;
    std::memcpy(&cp, raw.data() + i * kind, kind);  // little-endian
    append_utf8(out, cp);
  }
  if (count < static_cast<std::size_t>(length)) out += "…";
  return out;
}

std::optional<std::size_t> ObjectReader::ascii_key_index(
    std::uint64_t object, const std::vector<std::string_view>& candidates) {
  constexpr std::size_t kMaxKey = 128;
  std::size_t longest = 0;
  for (const auto c : candidates) longest = std::max(longest, c.size());
  const std::uint64_t header = layout_.unicode_ascii_data;
  if (!plausible(object) || header == 0 || longest > kMaxKey || header < layout_.unicode_state + 4 ||
      header < layout_.unicode_length + 8 || header < layout_.object_type + 8) {
    return std::nullopt;
  }
  std::uint8_t raw[256 + kMaxKey] = {};
  if (header > 256) return std::nullopt;
  // A prefix is enough: a key shorter than the longest candidate may end before a mapping does.
  const std::size_t got = memory_.read(object, raw, header + longest);
  if (got < header) return std::nullopt;
  std::uint64_t type = 0;
  std::int64_t length = 0;
  std::uint32_t state = 0;
  std::memcpy(&type, raw + layout_.object_type, sizeof type);
  std::memcpy(&length, raw + layout_.unicode_length, sizeof length);
  std::memcpy(&state, raw + layout_.unicode_state, sizeof state);
  const bool compact_ascii = ((state >> 2) & 7u) == 1 && ((state >> 5) & 1u) && ((state >> 6) & 1u);
  if (!compact_ascii || length <= 0 || static_cast<std::size_t>(length) > longest ||
      got < header + static_cast<std::size_t>(length)) {
    return std::nullopt;
  }
  if (str_type_ ? type != *str_type_ : type_name(object) != "str") return std::nullopt;
  str_type_ = type;
  const std::string_view text(reinterpret_cast<const char*>(raw + header),
                              static_cast<std::size_t>(length));
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i] == text) return i;
  }
  return std::nullopt;
}

std::optional<std::string> ObjectReader::bytes(std::uint64_t object, std::size_t max_bytes) {
  if (type_name(object) != "bytes") return std::nullopt;
  const auto size = var_size(object);
  if (!size) return std::nullopt;
  std::string out(std::min<std::size_t>(static_cast<std::size_t>(*size), max_bytes), '\0');
  if (!out.empty() && !read(object + layout_.bytes_data, out.data(), out.size())) {
    return std::nullopt;
  }
  return out;
}

std::optional<std::string> ObjectReader::int_repr(std::uint64_t object) {
  std::int64_t tag = 0;
  if (!read(object + layout_.var_size, &tag, sizeof tag)) return std::nullopt;
  std::uint64_t digits = 0;
  bool negative = false;
  if (layout_.long_has_tag) {
    const auto bits = static_cast<std::uint64_t>(tag);
    digits = bits >> 3;
    negative = (bits & 3) == 2;
    if ((bits & 3) == 1) return "0";
  } else {
    negative = tag < 0;
    digits = static_cast<std::uint64_t>(negative ? -tag : tag);
  }
  if (digits == 0) return "0";
  if (digits > 2) return std::string("<int with ") + std::to_string(digits * 30) + " bits>";
  std::uint32_t d[2] = {0, 0};
  if (!read(object + layout_.long_digits, d, digits * 4)) return std::nullopt;
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
  std::uint64_t entries = 0, count = 0, entry_size = 24, key_at = 8, value_at = 16;
  if (layout_.dict_keys_310) {
    // {dk_refcnt, dk_size, dk_lookup, dk_usable, dk_nentries, dk_indices[]}
    std::int64_t header[5];
    if (!read(keys, header, sizeof header) || header[1] <= 0 || header[1] > (1 << 26)) return items;
    const auto size = static_cast<std::uint64_t>(header[1]);
    const std::uint64_t width = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffff ? 4 : 8;
    entries = keys + 40 + size * width;
    count = static_cast<std::uint64_t>(header[4]);
  } else {
    // {dk_refcnt, u8 log2_size, u8 log2_index_bytes, u8 kind, u32 version, dk_usable, dk_nentries}
    std::uint8_t shape[3];
    std::int64_t nentries = 0;
    if (!read(keys + 8, shape, sizeof shape) || !read(keys + 24, &nentries, sizeof nentries) ||
        shape[1] > 40 || nentries < 0) {
      return items;
    }
    entries = keys + 32 + (std::uint64_t{1} << shape[1]);
    count = static_cast<std::uint64_t>(nentries);
    if (shape[2] != 0) {  // unicode keys: {key, value}
      entry_size = 16;
      key_at = 0;
      value_at = 8;
    }
  }
  count = std::min<std::uint64_t>(count, max_items);
  std::vector<std::uint64_t> raw(count * entry_size / 8);
  if (raw.empty() || !read(entries, raw.data(), raw.size() * 8)) return items;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t key = raw[(i * entry_size + key_at) / 8];
    std::uint64_t value = raw[(i * entry_size + value_at) / 8];
    if (values != 0) {
      value = pointer_at(values + layout_.dict_values_items + i * 8).value_or(0);
    }
    if (key != 0 && value != 0) items.emplace_back(key, value);
  }
  return items;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> ObjectReader::dict_items(
    std::uint64_t dict, std::size_t max_items) {
  const auto keys = pointer_at(dict + layout_.dict_keys);
  const auto values = pointer_at(dict + layout_.dict_values);
  if (!keys || !plausible(*keys)) return {};
  return keys_entries(*keys, values.value_or(0), max_items);
}

std::optional<std::uint64_t> ObjectReader::dict_get(std::uint64_t dict, std::string_view key) {
  for (const auto& [k, v] : dict_items(dict)) {
    if (string(k, key.size() + 1) == key) return v;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> ObjectReader::attribute(std::uint64_t object, std::string_view name) {
  const auto type = pointer_at(object + layout_.object_type);
  if (!type || !plausible(*type)) return std::nullopt;
  std::uint64_t flags = 0;
  read(*type + layout_.type_flags, &flags, sizeof flags);
  constexpr std::uint64_t kManagedDict = 1u << 4, kInlineValues = 1u << 2;
  const auto from_values = [&](std::uint64_t values) -> std::optional<std::uint64_t> {
    const auto keys = pointer_at(*type + layout_.heap_type_cached_keys);
    if (!keys || !plausible(*keys)) return std::nullopt;
    for (const auto& [k, v] : keys_entries(*keys, values, 256)) {
      if (string(k, name.size() + 1) == name) return v;
    }
    return std::nullopt;
  };
  std::optional<std::uint64_t> dict;
  switch (layout_.managed_dict) {
    case Layout::ManagedDict::kNone: {
      std::int64_t offset = 0;
      if (read(*type + layout_.type_dictoffset, &offset, sizeof offset) && offset > 0) {
        dict = pointer_at(object + static_cast<std::uint64_t>(offset));
      }
      break;
    }
    case Layout::ManagedDict::kValuesAtMinus4:
      if (!(flags & kManagedDict)) return std::nullopt;
      dict = pointer_at(object - 24);
      if (!dict || *dict == 0) {
        const auto values = pointer_at(object - 32);
        return values && *values ? from_values(*values) : std::nullopt;
      }
      break;
    case Layout::ManagedDict::kTaggedAtMinus3: {
      if (!(flags & kManagedDict)) return std::nullopt;
      const auto tagged = pointer_at(object - 24);
      if (!tagged || *tagged == 0) return std::nullopt;
      if (*tagged & 1) return from_values(*tagged + 1);  // stored as values - 1
      dict = tagged;
      break;
    }
    case Layout::ManagedDict::kInlineValues: {
      if (!(flags & kManagedDict)) return std::nullopt;
      dict = pointer_at(object - 24);
      if ((!dict || *dict == 0) && (flags & kInlineValues)) {
        std::int64_t basic_size = 0;
        std::uint8_t valid = 0;
        if (!read(*type + layout_.type_basicsize, &basic_size, sizeof basic_size) ||
            basic_size <= 0) {
          return std::nullopt;
        }
        const std::uint64_t values = object + static_cast<std::uint64_t>(basic_size);
        if (!read(values + 3, &valid, 1) || !valid) return std::nullopt;
        return from_values(values);
      }
      break;
    }
  }
  if (!dict || *dict == 0) return std::nullopt;
  return dict_get(*dict, name);
}

std::optional<std::uint64_t> ObjectReader::class_attribute(std::uint64_t type,
                                                           std::string_view name) {
  if (!plausible(type)) return std::nullopt;
  const auto dict = pointer_at(type + layout_.type_dict);
  if (!dict || !plausible(*dict) || type_name(*dict) != "dict") return std::nullopt;
  return dict_get(*dict, name);
}

std::optional<std::vector<std::uint64_t>> ObjectReader::sequence_items(std::uint64_t object,
                                                                       std::size_t max_items) {
  const auto type = type_name(object);
  if (type != "list" && type != "tuple") return std::nullopt;
  const auto size = var_size(object);
  if (!size) return std::nullopt;
  const auto items = *type == "tuple" ? std::optional<std::uint64_t>(object + layout_.tuple_items)
                                      : pointer_at(object + layout_.list_items);
  if (!items) return std::nullopt;
  const auto count = std::min<std::uint64_t>(static_cast<std::uint64_t>(*size), max_items);
  std::vector<std::uint64_t> out(count);
  if (count > 0 && !read(*items, out.data(), count * 8)) return std::nullopt;
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
    double value = 0;
    if (!read(object + layout_.float_value, &value, sizeof value)) return "<float>";
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
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
        tuple ? std::optional<std::uint64_t>(object + layout_.tuple_items)
              : pointer_at(object + layout_.list_items);
    if (!items) return "<" + *type + ">";
    std::string out = tuple ? "(" : "[";
    const std::int64_t shown = std::min<std::int64_t>(*size, 8);
    for (std::int64_t i = 0; i < shown; ++i) {
      if (i) out += ", ";
      const auto item = pointer_at(*items + static_cast<std::uint64_t>(i) * 8);
      out += item ? repr(*item, depth - 1) : "<unreadable>";
    }
    if (*size > shown) out += ", …";
    if (tuple && *size == 1) out += ",";
    return out + (tuple ? ")" : "]");
  }
  return "<" + *type + ">";
}

}  // namespace hangscope::python
