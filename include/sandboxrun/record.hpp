// Records declared once. A record type lists its fields in a `fields` tuple (the name each has
// in JSON and the member that holds it); writing, reading, the documentation check and the
// round-trip tests all go through that one list, so a field cannot be written under one name
// and read under another (youki's `State` is one serde type for save() and load()).
//
//   struct Resources {
//     uint64_t cpu_ms = 0;
//     std::optional<uint64_t> oom_kills;  // absent from the JSON when empty
//     static constexpr auto fields = std::tuple{record::field("cpu_ms", &Resources::cpu_ms), ...};
//   };
//
// A member declared with flatten() has its own fields written at this level (the members every
// record of a run carries). In a namespace that holds such types, `using record::to_json;
// using record::from_json;` lets nlohmann find them (argument-dependent lookup).
#pragma once

#include <chrono>
#include <concepts>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

// std::optional (null when empty) and std::chrono durations (their count) inside records and
// settings; nlohmann 3.11.2 has neither.
namespace nlohmann {
template <class T>
struct adl_serializer<std::optional<T>> {
  static void to_json(json& j, const std::optional<T>& v) {
    if (v) j = *v;
    else j = nullptr;
  }
  static void from_json(const json& j, std::optional<T>& v) {
    if (j.is_null()) v.reset();
    else v = j.get<T>();
  }
};
template <class Rep, class Period>
struct adl_serializer<std::chrono::duration<Rep, Period>> {
  static void to_json(json& j, const std::chrono::duration<Rep, Period>& d) { j = d.count(); }
  static void from_json(const json& j, std::chrono::duration<Rep, Period>& d) {
    d = std::chrono::duration<Rep, Period>(j.get<Rep>());
  }
};
}  // namespace nlohmann

namespace sandboxrun::record {

template <class T, class M>
struct Field {
  std::string_view name;
  M T::*member;
  bool omit_default = false;  // left out of the JSON while it holds M{} (false, 0, empty)
  bool null_when_empty = false;  // an empty std::optional is written as null, not left out
  using value_type = M;
};
template <class T, class M>
constexpr Field<T, M> field(std::string_view name, M T::*member) {
  return {name, member};
}
// A field written only when it is not its default: `"approximate": true` or nothing.
template <class T, class M>
constexpr Field<T, M> field_if_set(std::string_view name, M T::*member) {
  return {name, member, true};
}
// An optional field written as null while empty (a JSON shape that had a null there).
template <class T, class M>
constexpr Field<T, M> field_or_null(std::string_view name, M T::*member) {
  return {name, member, false, true};
}
// A member whose own fields are written at this level.
template <class T, class M>
struct Flat {
  M T::*member;
  using value_type = M;
};
template <class T, class M>
constexpr Flat<T, M> flatten(M T::*member) {
  return {member};
}

template <class T>
concept Described = requires { T::fields; };

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

template <Described T>
void to_json(nlohmann::json& j, const T& v);
template <Described T>
void from_json(const nlohmann::json& j, T& v);

namespace detail {

template <class T, class M>
void put(nlohmann::json& j, const T& v, const Field<T, M>& f) {
  const M& value = v.*(f.member);
  if constexpr (std::equality_comparable<M>)
    if (f.omit_default && value == M{}) return;
  if constexpr (is_optional<M>::value) {
    if (value) j[std::string(f.name)] = *value;
    else if (f.null_when_empty) j[std::string(f.name)] = nullptr;
  } else {
    j[std::string(f.name)] = value;
  }
}
template <class T, class M>
void put(nlohmann::json& j, const T& v, const Flat<T, M>& f) {
  nlohmann::json inner;
  to_json(inner, v.*(f.member));
  for (auto& [k, val] : inner.items()) j[k] = std::move(val);
}

// Lenient about presence (a record written before a field existed reads as its default), strict
// about type: a value of the wrong type throws nlohmann::json::type_error.
template <class T, class M>
void get(const nlohmann::json& j, T& v, const Field<T, M>& f) {
  M& out = v.*(f.member);
  auto it = j.find(f.name);
  if (it == j.end() || it->is_null()) return;
  if constexpr (is_optional<M>::value) {
    out.emplace();
    it->get_to(*out);
  } else {
    it->get_to(out);
  }
}
template <class T, class M>
void get(const nlohmann::json& j, T& v, const Flat<T, M>& f) {
  from_json(j, v.*(f.member));
}

}  // namespace detail

template <Described T>
void to_json(nlohmann::json& j, const T& v) {
  j = nlohmann::json::object();
  std::apply([&](const auto&... f) { (detail::put(j, v, f), ...); }, T::fields);
}

template <Described T>
void from_json(const nlohmann::json& j, T& v) {
  if (!j.is_object()) throw nlohmann::json::type_error::create(302, "a record must be a JSON object", &j);
  std::apply([&](const auto&... f) { (detail::get(j, v, f), ...); }, T::fields);
}

// Reads `j` as T; nullopt when a value has the wrong type (damaged or foreign data).
template <class T>
std::optional<T> read(const nlohmann::json& j) {
  try {
    return j.get<T>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// The JSON type of a field as the documentation names it: "string", "integer", "number",
// "boolean", "object", "list of TYPE", "optional TYPE".
template <class M>
std::string json_type() {
  if constexpr (is_optional<M>::value) {
    return "optional " + json_type<typename M::value_type>();
  } else if constexpr (std::is_same_v<M, bool>) {
    return "boolean";
  } else if constexpr (std::is_integral_v<M>) {
    return "integer";
  } else if constexpr (std::is_floating_point_v<M>) {
    return "number";
  } else if constexpr (std::is_same_v<M, std::string>) {
    return "string";
  } else if constexpr (is_vector<M>::value) {
    return "list of " + json_type<typename M::value_type>();
  } else {
    return "object";  // a described record, a map of names, or free-form JSON
  }
}

// Each field's name and JSON type, flattened fields expanded, in declaration order.
template <Described T>
std::vector<std::pair<std::string, std::string>> schema() {
  std::vector<std::pair<std::string, std::string>> out;
  std::apply(
      [&](const auto&... f) {
        auto one = [&](const auto& fld) {
          using F = std::remove_cvref_t<decltype(fld)>;
          using M = typename F::value_type;
          if constexpr (requires { fld.name; }) {
            std::string type = json_type<M>();
            if (fld.omit_default) type = "optional " + type;
            if (fld.null_when_empty) type.replace(0, 8, "nullable");  // "optional X" -> "nullable X"
            out.emplace_back(std::string(fld.name), std::move(type));
          } else {
            auto inner = schema<M>();
            out.insert(out.end(), inner.begin(), inner.end());
          }
        };
        (one(f), ...);
      },
      T::fields);
  return out;
}

}  // namespace sandboxrun::record

namespace sandboxrun {
// The record types of the public API live here: nlohmann finds their JSON conversions by
// argument-dependent lookup through these.
using record::from_json;
using record::to_json;
}  // namespace sandboxrun
