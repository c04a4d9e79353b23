// Frames described once. Each frame struct of protocol.h has a FrameFields<S> (protocol.cc): its
// FrameType and its fields, one line each, saying the wire name, the member and how it travels
// (required; with a default when absent; only when set; a name for an enum; a rank). Encode and
// Decode make the frame's JSON and read it back from that description, reading the fields in the
// order listed, so the first missing or mistyped one is the error a frame gets (FrameReader). A
// frame struct's ToJson and FromJson are Encode and Decode.
// Pure. Thread-safety: stateless.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "protocol.h"

namespace hyperpack::scheduler::protocol::codec {

// A name on the wire for each value of an enum.
template <typename E>
using Names = std::pair<E, const char*>;

template <typename E, size_t N>
const char* NameIn(const Names<E> (&names)[N], E value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return "?";  // unreachable: every table lists every value
}

// The value named `name`, or an error saying where and what was allowed.
template <typename E, size_t N>
Result<E> ValueIn(const Names<E> (&names)[N], const std::string& name, const std::string& what) {
  std::string allowed;
  for (const auto& [v, n] : names) {
    if (name == n) return v;
    allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  }
  return Status::Invalid(what, " '", name, "'; expected one of ", allowed);
}

// The value named by field `key` of the frame `r` reads; the first value after an error.
template <typename E, size_t N>
E NamedField(FrameReader& r, const Names<E> (&names)[N], const char* key, const std::string& what) {
  const std::string name = r.Field<std::string>(key);
  if (!r.ok()) return names[0].first;
  Result<E> value = ValueIn(names, name, what);
  if (value.ok()) return *value;
  r.Fail(value.status());
  return names[0].first;
}

// A frame of `type` with nothing else yet.
inline Json Frame(FrameType type) { return {{"type", FrameTypeName(type)}}; }

// ---- How a field travels ----------------------------------------------------------------------

// Always sent; an error when absent.
template <class S, class T>
struct Required {
  const char* name;
  T S::*member;
  void Write(const S& s, Json& j) const { j[name] = s.*member; }
  void Read(FrameReader& r, S& s) const { s.*member = r.Field<T>(name); }
};

// Always sent; read as `fallback` when absent (what a peer of an older version leaves out).
template <class S, class T>
struct WithDefault {
  const char* name;
  T S::*member;
  T fallback;
  void Write(const S& s, Json& j) const { j[name] = s.*member; }
  void Read(FrameReader& r, S& s) const { s.*member = r.Optional<T>(name, fallback); }
};

// Sent only when set, read only when present.
template <class S, class T>
struct IfSet {
  const char* name;
  std::optional<T> S::*member;
  void Write(const S& s, Json& j) const {
    if (s.*member) j[name] = *(s.*member);
  }
  void Read(FrameReader& r, S& s) const {
    if (r.Has(name)) s.*member = r.Field<T>(name);
  }
};

// Sent only when not empty; empty when absent.
template <class S, class T>
struct IfNotEmpty {
  const char* name;
  T S::*member;
  void Write(const S& s, Json& j) const {
    if (!(s.*member).empty()) j[name] = s.*member;
  }
  void Read(FrameReader& r, S& s) const { s.*member = r.Optional<T>(name, T{}); }
};

// A number sent only when it is not zero, read as zero when absent.
template <class S, class T>
struct IfNonZero {
  const char* name;
  T S::*member;
  void Write(const S& s, Json& j) const {
    if (s.*member != T{}) j[name] = s.*member;
  }
  void Read(FrameReader& r, S& s) const { s.*member = r.Optional<T>(name, T{}); }
};

// An enum, as its name in `names`; `what` opens the error for a name not there.
template <class S, class E, size_t N>
struct Named {
  const char* name;
  E S::*member;
  const Names<E> (&names)[N];
  const char* what;
  void Write(const S& s, Json& j) const { j[name] = NameIn(names, s.*member); }
  void Read(FrameReader& r, S& s) const { s.*member = NamedField(r, names, name, what); }
};

// A rank (RankRef) as three fields: "run" (0 when absent: a version 1 peer), "trial", "rank".
inline void WriteRank(const RankRef& ref, Json& j) {
  j["run"] = ref.run;
  j["trial"] = ref.id.trial;
  j["rank"] = ref.id.rank;
}
inline RankRef ReadRank(FrameReader& r) {
  // Braced initialisers run left to right: the fields are read in this order.
  return {r.Optional<int64_t>("run", 0), {r.Field<int>("trial"), r.Field<int>("rank")}};
}
template <class S>
struct Rank {
  RankRef S::*member;
  void Write(const S& s, Json& j) const { WriteRank(s.*member, j); }
  void Read(FrameReader& r, S& s) const { s.*member = ReadRank(r); }
};

// A field that is not one member: written and read by the two functions given.
template <class W, class R>
struct Custom {
  W write;
  R read;
  template <class S>
  void Write(const S& s, Json& j) const {
    write(s, j);
  }
  template <class S>
  void Read(FrameReader& r, S& s) const {
    read(r, s);
  }
};
template <class W, class R>
Custom(W, R) -> Custom<W, R>;

// The field kinds by what they are given: a member (required), a member and its default, an
// optional member, an enum member with its names.
template <class S, class T>
Required<S, T> Field(const char* name, T S::*member) {
  return {name, member};
}
template <class S, class T>
WithDefault<S, T> Field(const char* name, T S::*member, std::type_identity_t<T> fallback) {
  return {name, member, std::move(fallback)};
}
template <class S, class T>
IfSet<S, T> Field(const char* name, std::optional<T> S::*member) {
  return {name, member};
}
template <class S, class E, size_t N>
Named<S, E, N> Field(const char* name, E S::*member, const Names<E> (&names)[N], const char* what) {
  return {name, member, names, what};
}

// ---- Encode and decode --------------------------------------------------------------------------

template <class S>
struct FrameFields;  // specialised per frame struct in protocol.cc

template <class S>
Json Encode(const S& s) {
  Json j = Frame(FrameFields<S>::kType);
  std::apply([&](const auto&... f) { (f.Write(s, j), ...); }, FrameFields<S>::Fields());
  return j;
}

// Reads every field in order; then the frame's own check (FrameFields<S>::Check), where it has one.
template <class S>
Result<S> Decode(const Json& frame) {
  FrameReader r(frame, FrameFields<S>::kType);
  S s;
  std::apply([&](const auto&... f) { (f.Read(r, s), ...); }, FrameFields<S>::Fields());
  if constexpr (requires { FrameFields<S>::Check(r, s); }) {
    if (r.ok()) FrameFields<S>::Check(r, s);
  }
  return r.Finish(std::move(s));
}

}  // namespace hyperpack::scheduler::protocol::codec
