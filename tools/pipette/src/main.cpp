// `pipette`: plan, explain and simulate LLM training layouts offline; admin helpers.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  return pipette::cli::run(words);
}
