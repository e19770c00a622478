// A value its copies share until one of them changes it: the containers a decoded snapshot holds
// once for every process that repeats them (a node's facts, sockets, log lines), read like the
// container itself.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <utility>

namespace hangscope::model {

template <typename Container>
class Shared {
 public:
  using value_type = typename Container::value_type;
  using const_iterator = typename Container::const_iterator;

  Shared() = default;
  Shared(Container value)  // NOLINT(google-explicit-constructor): a value type
      : value_(std::make_shared<Container>(std::move(value))) {}
  Shared(std::initializer_list<value_type> values) : Shared(Container(values)) {}
  // A value held elsewhere too (a decoder's interned one, snapshot::Interner): no copy is made
  // until one changes.
  explicit Shared(std::shared_ptr<Container> value) : value_(std::move(value)) {}

  const Container& get() const {
    static const Container kEmpty;
    return value_ ? *value_ : kEmpty;
  }
  operator const Container&() const { return get(); }  // NOLINT: read as the container

  const_iterator begin() const { return get().begin(); }
  const_iterator end() const { return get().end(); }
  std::size_t size() const { return get().size(); }
  bool empty() const { return get().empty(); }

  // Sequences (read only: a change goes through edit()).
  const auto& operator[](std::size_t i) const requires requires(const Container& c) { c.front(); }
  { return get()[i]; }
  const auto& front() const { return get().front(); }
  const auto& back() const { return get().back(); }
  void push_back(value_type value) { edit().push_back(std::move(value)); }

  // Maps.
  template <typename Key>
  auto find(const Key& key) const {
    return get().find(key);
  }
  template <typename Key>
  std::size_t count(const Key& key) const {
    return get().count(key);
  }
  template <typename Key>
  bool contains(const Key& key) const {
    return get().contains(key);
  }
  template <typename Key>
  const auto& at(const Key& key) const {
    return get().at(key);
  }
  // A map's entry to set (copied first when shared).
  template <typename Key>
  auto& operator[](Key&& key) requires requires {
    typename Container::mapped_type;
  }
  { return edit()[std::forward<Key>(key)]; }
  template <typename Iterator>
  void insert(Iterator first, Iterator last) {
    if (first != last) edit().insert(first, last);
  }
  template <typename... Args>
  auto emplace(Args&&... args) {
    return edit().emplace(std::forward<Args>(args)...);
  }

  // The container to change: this copy's own when another copy shares it.
  Container& edit() {
    if (!value_ || value_.use_count() > 1) {
      value_ = std::make_shared<Container>(value_ ? *value_ : Container{});
    }
    return *value_;
  }

  // Whether the two hold one value (not merely equal ones).
  bool shares(const Shared& other) const { return value_ != nullptr && value_ == other.value_; }
  std::shared_ptr<const Container> pointer() const { return value_; }

  bool operator==(const Shared& other) const {
    return value_ == other.value_ || get() == other.get();
  }

 private:
  std::shared_ptr<Container> value_;  // null: empty; changed only when held by no other copy
};

}  // namespace hangscope::model
