// Command-line parsing for the kiln command: positional arguments and
// --options (each either a flag or taking one value, "--name value" or
// "--name=value"). An unknown option or a missing value is a UsageError,
// which main turns into the command's usage text and exit status 2.
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> options;  // name (no dashes) -> value ("" for flags)
  bool has(const std::string& name) const { return options.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback) const;
  std::vector<std::string> all(const std::string& name) const;
  // A non-negative integer option; a UsageError naming the option otherwise.
  long long get_count(const std::string& name, long long fallback, long long max) const;
};

Args parse_args(const std::vector<std::string>& argv, const std::set<std::string>& with_value,
                const std::set<std::string>& flags);

}  // namespace kiln::cli
