// kiln's C++ logger: one, quiet by default. Messages at or above the level
// named by KILN_LOG_LEVEL (error, warn, info, debug) go to stderr, prefixed
// "[kiln LEVEL]". Usage: log_at(LogLevel::info, "compiled ", n, " nodes").
#pragma once

#include <iostream>

#include "support/error.h"

namespace kiln {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

// The level from KILN_LOG_LEVEL, read once; unknown names mean error.
LogLevel log_threshold();
const char* log_level_name(LogLevel level);

template <typename... Parts>
void log_at(LogLevel level, Parts&&... parts) {
  if (static_cast<int>(level) > static_cast<int>(log_threshold())) return;
  std::cerr << "[kiln " << log_level_name(level) << "] " << str_cat(std::forward<Parts>(parts)...) << '\n';
}

}  // namespace kiln
