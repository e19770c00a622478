#include "hangscope/python/torch_stores.h"

#include <array>
#include <cstring>
#include <span>
#include <string_view>

namespace hangscope::python {
namespace {

// libstdc++'s std::string: {char* data; size_t size; union {char local[16]; size_t capacity;}}.
constexpr std::size_t kStringBytes = 32;
constexpr std::size_t kMaxStoreText = 1024;
// c10d's Store: c10::intrusive_ptr_target (vtable, refcount, weakcount) and the timeout, 32
// bytes; measured on Debian's torch 1.13: PrefixStore's prefix_ at 32 and store_ at 64,
// TCPStore's addr_ (host string, then the port) at 32, GlooStore's store_ at 8. Other layouts
// are searched within the first bytes of the object.
constexpr std::size_t kStoreBase = 32;
constexpr std::size_t kPrefixInner = 64;
constexpr std::size_t kGlooInner = 8;
constexpr std::size_t kSearchBytes = 512;  // of a process group's object, for its store
constexpr int kMaxChain = 8;

std::optional<std::string> cxx_string(ObjectReader& objects, std::uint64_t at) {
  std::array<std::uint64_t, 2> head{};
  if (!objects.read(at, head.data(), sizeof head)) return std::nullopt;
  const auto [data, size] = head;
  if (size > kMaxStoreText) return std::nullopt;
  if (size < 16 ? data != at + 16 && !objects.plausible(data) : !objects.plausible(data)) {
    return std::nullopt;
  }
  std::string text(size, '\0');
  if (size > 0 && !objects.read(data, text.data(), size)) return std::nullopt;
  for (const unsigned char c : text) {
    if (c < 0x20 || c >= 0x7f) return std::nullopt;  // prefixes and hosts are printable ASCII
  }
  return text;
}

bool host_like(std::string_view host) {
  if (host.empty() || host.size() > 255) return false;
  for (const char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == ':' || c == '_' || c == '[' || c == ']' ||
                    c == '%';
    if (!ok) return false;
  }
  return true;
}

std::optional<std::uint16_t> port_at(ObjectReader& objects, std::uint64_t at) {
  std::uint16_t port = 0;
  if (!objects.read(at, &port, sizeof port) || port == 0) return std::nullopt;
  return port;
}

}  // namespace

std::string StoreChain::address() const {
  if (kind == "tcp") return host + ":" + std::to_string(port);
  if (kind == "file") return "file:" + host;
  return "";
}

TorchStoreReader TorchStoreReader::locate(elf::ProcessImage& image) {
  static constexpr std::array<std::string_view, 5> kVtables = {
      "_ZTVN4c10d11PrefixStoreE", "_ZTVN4c10d8TCPStoreE", "_ZTVN4c10d16ProcessGroupGloo9GlooStoreE",
      "_ZTVN4c10d9FileStoreE", "_ZTVN4c10d9HashStoreE"};
  static constexpr std::array<StoreClass, 5> kClasses = {StoreClass::kPrefix, StoreClass::kTcp,
                                                         StoreClass::kGlooWrapper,
                                                         StoreClass::kFile, StoreClass::kHash};
  TorchStoreReader reader;
  for (const proc::Mapping* mapping : image.file_mappings()) {
    const std::string_view path = mapping->path;
    const auto slash = path.rfind('/');
    const auto file = path.substr(slash == std::string_view::npos ? 0 : slash + 1);
    if (file.rfind("libtorch_cpu.so", 0) != 0) continue;
    const auto location = image.locate(mapping->start);
    if (!location || location->module == nullptr) continue;
    const auto found = location->module->elf().find_symbols(kVtables);
    for (std::size_t i = 0; i < found.size(); ++i) {
      // A vtable object's address point is past the offset-to-top and typeinfo words.
      if (found[i]) reader.classes_[location->bias + found[i]->value + 16] = kClasses[i];
    }
    break;
  }
  return reader;
}

std::optional<TorchStoreReader::StoreClass> TorchStoreReader::class_of(ObjectReader& objects,
                                                                       std::uint64_t object) const {
  if (!objects.plausible(object)) return std::nullopt;
  const auto vtable = objects.pointer_at(object);
  if (!vtable) return std::nullopt;
  const auto it = classes_.find(*vtable);
  if (it == classes_.end()) return std::nullopt;
  return it->second;
}

// The first pointer in [from, to) of `object` to a store of a known class.
std::optional<std::uint64_t> TorchStoreReader::inner_store(ObjectReader& objects,
                                                           std::uint64_t object, std::size_t from,
                                                           std::size_t to) const {
  for (std::size_t offset = from; offset + 8 <= to; offset += 8) {
    const auto pointer = objects.pointer_at(object + offset);
    if (pointer && class_of(objects, *pointer)) return pointer;
  }
  return std::nullopt;
}

void TorchStoreReader::follow(ObjectReader& objects, std::uint64_t store, StoreChain& chain) const {
  for (int depth = 0; depth < kMaxChain; ++depth) {
    const auto kind = class_of(objects, store);
    if (!kind) return;
    switch (*kind) {
      case StoreClass::kGlooWrapper: {
        auto inner = objects.pointer_at(store + kGlooInner);
        if (!inner || !class_of(objects, *inner)) inner = inner_store(objects, store, 8, 64);
        if (!inner) return;
        store = *inner;
        continue;
      }
      case StoreClass::kPrefix: {
        std::size_t inner_offset = kPrefixInner;
        auto inner = objects.pointer_at(store + kPrefixInner);
        if (!inner || !class_of(objects, *inner)) {
          inner.reset();
          for (std::size_t o = kStoreBase; o + 8 <= 160 && !inner; o += 8) {
            const auto p = objects.pointer_at(store + o);
            if (p && class_of(objects, *p)) inner = p, inner_offset = o;
          }
        }
        if (!inner) return;
        // The prefix is the string just before the inner store.
        const auto prefix = inner_offset >= kStoreBase + kStringBytes
                                ? cxx_string(objects, store + inner_offset - kStringBytes)
                                : std::nullopt;
        if (prefix) chain.prefixes.push_back(*prefix);
        store = *inner;
        continue;
      }
      case StoreClass::kTcp:
        for (std::size_t o = kStoreBase; o + kStringBytes + 2 <= 256; o += 8) {
          const auto host = cxx_string(objects, store + o);
          const auto port =
              host && host_like(*host) ? port_at(objects, store + o + kStringBytes) : std::nullopt;
          if (!port) continue;
          chain.kind = "tcp";
          chain.host = *host;
          chain.port = *port;
          return;
        }
        return;
      case StoreClass::kFile:
        chain.kind = "file";
        chain.host = cxx_string(objects, store + kStoreBase).value_or("");
        return;
      case StoreClass::kHash:
        chain.kind = "hash";
        return;
    }
  }
}

std::optional<StoreChain> TorchStoreReader::chain_of(ObjectReader& objects,
                                                     std::uint64_t cpp_object) const {
  if (!available() || !objects.plausible(cpp_object)) return std::nullopt;
  auto store = class_of(objects, cpp_object) ? std::optional<std::uint64_t>(cpp_object)
                                             : inner_store(objects, cpp_object, 8, kSearchBytes);
  if (!store) return std::nullopt;
  StoreChain chain;
  follow(objects, *store, chain);
  if (chain.kind.empty()) return std::nullopt;
  return chain;
}

}  // namespace hangscope::python
