// The log threshold from the environment.
#include "support/log.h"

#include "support/env.h"

namespace kiln {

LogLevel log_threshold() {
  static const LogLevel level = [] {
    std::string v = env::log_level();
    if (v == "debug") return LogLevel::debug;
    if (v == "info") return LogLevel::info;
    if (v == "warn") return LogLevel::warn;
    return LogLevel::error;
  }();
  return level;
}

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

}  // namespace kiln
