#pragma once
// Typed values named in text (states, origins, executor kinds): one way to read a name back.
#include <cstddef>
#include <optional>
#include <string_view>

namespace drover {

// The value of `all` whose ToString is `name`; nullopt when none is. ToString is found by
// argument-dependent lookup, next to the enum.
template <typename E, std::size_t N>
std::optional<E> ParseByName(const E (&all)[N], std::string_view name) {
  for (E e : all) {
    if (ToString(e) == name) return e;
  }
  return std::nullopt;
}

}  // namespace drover
