// Errors: one exception type for everything kiln rejects, and the check macro
// that builds its message. Messages name the node, input or option at fault.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace kiln {

// What went wrong, in terms a caller can act on. Reaches Python as kiln.Error
// (a subclass of RuntimeError), or ValueError/TypeError-like subclasses below.
enum class ErrorKind { invalid_argument, unsupported, runtime, out_of_memory, corrupt_file };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

template <typename... Parts>
std::string str_cat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

template <typename... Parts>
[[noreturn]] void fail(ErrorKind kind, Parts&&... parts) {
  throw Error(kind, str_cat(std::forward<Parts>(parts)...));
}

}  // namespace kiln

// KILN_CHECK(cond, "message parts", value, ...) throws kiln::Error(invalid_argument).
#define KILN_CHECK(cond, ...)                                             \
  do {                                                                    \
    if (!(cond)) ::kiln::fail(::kiln::ErrorKind::invalid_argument, __VA_ARGS__); \
  } while (0)

// KILN_CHECK_KIND(kind, cond, ...) throws with an explicit ErrorKind.
#define KILN_CHECK_KIND(kind, cond, ...)                    \
  do {                                                      \
    if (!(cond)) ::kiln::fail(::kiln::ErrorKind::kind, __VA_ARGS__); \
  } while (0)
