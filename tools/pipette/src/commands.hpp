#pragma once
#include <string>
#include <vector>

namespace pipette::cli {

// Exit statuses: 0 success; 1 the request failed (bad input file, nothing fits, I/O error);
// 2 the command line itself is wrong (unknown command or option, missing value).
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Runs `pipette WORDS...` (argv without the program name), printing to stdout and stderr.
int run(const std::vector<std::string>& words);

}  // namespace pipette::cli
