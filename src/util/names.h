// Name tables for enums: each enum's names are written once, as a table of {value, name}
// pairs, and both directions (value -> name for output, name -> value for rules data and
// options) read that table.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace imgcheck::util {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

template <class E, size_t N>
using NameTable = std::array<EnumName<E>, N>;

/// The name `table` gives `value`; `fallback` for a value it lacks (only a cast from an
/// out-of-range integer makes one, once NamesEvery holds).
template <class E, size_t N>
constexpr std::string_view Name(const NameTable<E, N>& table, E value,
                                std::string_view fallback = "unknown") {
  for (const EnumName<E>& e : table)
    if (e.value == value) return e.name;
  return fallback;
}

/// The value `table` names `text` (exact, case-sensitive); nullopt for any other text.
template <class E, size_t N>
constexpr std::optional<E> Parse(const NameTable<E, N>& table, std::string_view text) {
  for (const EnumName<E>& e : table)
    if (e.name == text) return e.value;
  return std::nullopt;
}

namespace names_detail {

/// Whether some enumerator of decltype(V) has the value V. GCC and Clang spell a template
/// argument that is an enumerator by its name ("V = ns::E::kName", "V = (anonymous
/// namespace)::E::kSm90") and any other value as a cast ("V = (ns::E)7"): digits right after a
/// ')' mean no name. The same property magic_enum relies on.
template <auto V>
constexpr bool IsEnumerator() {
  std::string_view signature = __PRETTY_FUNCTION__;
  size_t at = signature.find("V = ");
  if (at == std::string_view::npos) return false;
  size_t end = signature.find_first_of(";]", at);
  if (end == std::string_view::npos) return false;
  size_t digits = end;
  while (digits > at && signature[digits - 1] >= '0' && signature[digits - 1] <= '9') --digits;
  return digits == end || signature[digits - 1] != ')';
}

/// For each value 0, 1, ...: whether it is an enumerator of E.
template <class E, size_t... I>
constexpr std::array<bool, sizeof...(I)> Enumerators(std::index_sequence<I...> /*values*/) {
  return {IsEnumerator<static_cast<E>(I)>()...};
}

}  // namespace names_detail

/// The values probed for enumerators: every enum given to NamesEvery counts from 0 and stays
/// below this.
inline constexpr size_t kMaxEnumerators = 64;

/// True when `table` names every enumerator of E once, each by a different name: for
/// `static_assert(util::NamesEvery(kTable))` next to the table, so an enumerator added without
/// a name fails the build the way a switch without its case did.
template <class E, size_t N>
constexpr bool NamesEvery(const NameTable<E, N>& table) {
  constexpr auto kIs = names_detail::Enumerators<E>(std::make_index_sequence<kMaxEnumerators>());
  size_t enumerators = 0;
  for (bool is : kIs) enumerators += is ? 1 : 0;
  if (enumerators != N) return false;
  for (size_t i = 0; i < N; ++i) {
    auto value = static_cast<size_t>(table[i].value);
    if (value >= kMaxEnumerators || !kIs[value]) return false;
    for (size_t j = i + 1; j < N; ++j)
      if (table[i].value == table[j].value || table[i].name == table[j].name) return false;
  }
  return true;
}

}  // namespace imgcheck::util
