// check_cuda_architecture (runtime/cuda_architecture.h).
#include "runtime/cuda_architecture.h"

#include <utility>

#include "support/error.h"

namespace kiln {

namespace {

// "sm_90" -> (9, 0), "sm_100" -> (10, 0); false when the name is not of that form.
bool parse(const std::string& arch, std::pair<int, int>* version) {
  if (arch.size() < 5 || arch.size() > 6 || arch.compare(0, 3, "sm_") != 0) return false;
  for (size_t i = 3; i < arch.size(); ++i)
    if (arch[i] < '0' || arch[i] > '9') return false;
  *version = {std::stoi(arch.substr(3, arch.size() - 4)), arch.back() - '0'};
  return true;
}

}  // namespace

void check_cuda_architecture(const std::string& built, const std::string& here, const std::string& device) {
  std::pair<int, int> b, h;
  KILN_CHECK_KIND(corrupt_file, parse(built, &b), "the program names an unknown GPU architecture '", built, "'");
  KILN_CHECK(parse(here, &h), "unknown GPU architecture '", here, "' of ", device);
  KILN_CHECK_KIND(unsupported, b <= h, "the program was built for ", built, " GPUs; this GPU (", device, ") is ",
                  here, " and cannot run it (load it on a GPU of that architecture or newer, or on cpu)");
}

}  // namespace kiln
