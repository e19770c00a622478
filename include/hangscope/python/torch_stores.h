// The c10d store a torch process group was made on, read from the group's C++ object in the
// target's memory: which TCPStore (host and port) and which PrefixStore prefixes lie between,
// with each object's class told by its vtable (the vtables of libtorch's store classes).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/elf/process_image.h"
#include "hangscope/python/objects.h"

namespace hangscope::python {

// A store chain: the prefixes outermost first, then the store at its end.
struct StoreChain {
  std::vector<std::string> prefixes;
  std::string host;  // a TCPStore's host as given (an address or a name); "" for other stores
  int port = 0;
  std::string kind;             // "tcp" | "file" | "hash" ("" when the end was not reached)
  std::string address() const;  // "host:port" ("" when no TCPStore)
};

class TorchStoreReader {
 public:
  // Finds the store classes' vtables in the process's libtorch (libtorch_cpu); none found (no
  // torch, or a build without these symbols): available() is false and nothing is read.
  static TorchStoreReader locate(elf::ProcessImage& image);

  bool available() const { return !classes_.empty(); }

  // The store chain held by a C++ object: a process group (its store field, or gloo's
  // GlooStore wrapper around it) or a store itself. nullopt when no store was found.
  std::optional<StoreChain> chain_of(ObjectReader& objects, std::uint64_t cpp_object) const;

 private:
  enum class StoreClass { kPrefix, kTcp, kGlooWrapper, kFile, kHash };
  std::optional<StoreClass> class_of(ObjectReader& objects, std::uint64_t object) const;
  std::optional<std::uint64_t> inner_store(ObjectReader& objects, std::uint64_t object,
                                           std::size_t from, std::size_t to) const;
  void follow(ObjectReader& objects, std::uint64_t store, StoreChain& chain) const;

  std::map<std::uint64_t, StoreClass> classes_;  // vtable address point → class
};

}  // namespace hangscope::python
