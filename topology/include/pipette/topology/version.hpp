#pragma once

namespace pipette {

// The release, the same string in the plugin's log line, `pipette --version` and the package.
const char* version();

}  // namespace pipette
