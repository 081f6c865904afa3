// The kiln command's subcommands (main.cpp dispatches to them). Each takes
// its arguments after the subcommand name, prints its results to stdout
// (progress and errors to stderr) and returns the exit status.
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

int inspect_command(const std::vector<std::string>& argv);
int run_command(const std::vector<std::string>& argv);
int bench_command(const std::vector<std::string>& argv);

}  // namespace kiln::cli
