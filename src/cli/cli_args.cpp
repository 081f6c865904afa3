// Parsing of the kiln command's arguments (cli_args.h).
#include "cli_args.h"

namespace kiln::cli {

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = options.find(name);
  if (it == options.end()) return fallback;
  if (options.count(name) > 1) throw UsageError("--" + name + " given more than once");
  return it->second;
}

std::vector<std::string> Args::all(const std::string& name) const {
  std::vector<std::string> out;
  auto [lo, hi] = options.equal_range(name);
  for (auto it = lo; it != hi; ++it) out.push_back(it->second);
  return out;
}

long long Args::get_count(const std::string& name, long long fallback, long long max) const {
  if (!has(name)) return fallback;
  const std::string text = get(name, "");
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("--" + name + " takes a non-negative integer, got '" + text + "'");
  const long long v = std::stoll(text);
  if (v > max) throw UsageError("--" + name + " is at most " + std::to_string(max) + ", got " + text);
  return v;
}

Args parse_args(const std::vector<std::string>& argv, const std::set<std::string>& with_value,
                const std::set<std::string>& flags) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() < 2 || a.rfind("--", 0) != 0) {
      if (a.size() > 1 && a[0] == '-' && a != "-h") throw UsageError("unknown option '" + a + "'");
      if (a == "-h") args.options.emplace("help", "");
      else args.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (name == "help" || flags.count(name)) {
      if (inline_value) throw UsageError("--" + name + " takes no value");
      args.options.emplace(name, "");
    } else if (with_value.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argv.size()) throw UsageError("--" + name + " needs a value");
        value = argv[++i];
      }
      args.options.emplace(name, value);
    } else {
      throw UsageError("unknown option '--" + name + "'");
    }
  }
  return args;
}

}  // namespace kiln::cli
