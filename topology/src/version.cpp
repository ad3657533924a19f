#include "pipette/topology/version.hpp"

namespace pipette {

const char* version() { return PIPETTE_VERSION; }

}  // namespace pipette
