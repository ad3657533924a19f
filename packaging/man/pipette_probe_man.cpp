// Writes pipette-probe(1) from its --help text.
#include "pipette/probe/probe_options.hpp"
#include "pipette/topology/version.hpp"
#include "troff.hpp"

int main(int argc, char** argv) {
  return pipette::man::generate(argc, argv, {{"VERSION", pipette::version()},
                                             {"USAGE", pipette::man::verbatim(pipette::probe::probe_usage())}});
}
