// Which way an objective improves: one type for the study file, the storage and the reports.
// Stored and written as "minimize" | "maximize". Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string_view>

namespace hyperpack {

enum class Direction { kMinimize, kMaximize };

inline const char* DirectionName(Direction d) {
  return d == Direction::kMinimize ? "minimize" : "maximize";
}

// "minimize" | "maximize"; nullopt for anything else.
inline std::optional<Direction> ParseDirection(std::string_view name) {
  if (name == "minimize") return Direction::kMinimize;
  if (name == "maximize") return Direction::kMaximize;
  return std::nullopt;
}

}  // namespace hyperpack
