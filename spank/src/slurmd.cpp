// slurmd itself loads the plugin too; nothing of Pipette runs in the node daemon.
#include "contexts.hpp"

namespace pipette::spank {

int slurmd_init() { return 0; }

}  // namespace pipette::spank
