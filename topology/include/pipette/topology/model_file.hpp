#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "pipette/core/model.hpp"
#include "pipette/core/result.hpp"

namespace pipette {

// Reads one model file (format: the comment header of etc/models/megatron-1.7b.yaml and the
// README's "Model files" section). Strict: an unknown key, a wrong type or a missing required key
// is an Error "FILE:LINE: key 'x' ...: what to do"; the model is also checked with validate().
Result<ModelSpec> load_model_file(const std::string& path);
// The same on the file's contents; `path` names the source in messages and gives the default name.
Result<ModelSpec> parse_model_file(std::string_view text, const std::string& path);

// `preset_or_path` is a file path when it names an existing file or contains '/' or ends in
// .yaml/.yml; otherwise a preset name looked up as NAME.yaml in each directory in order.
// An unknown preset is an Error listing the available names.
Result<ModelSpec> load_model(std::string_view preset_or_path, const std::vector<std::string>& preset_dirs);

// The source tree's etc/models (for builds run in place) then the installed share/pipette/models.
std::vector<std::string> default_model_dirs();

// Preset names (file names without .yaml) found in the directories, sorted, without duplicates.
std::vector<std::string> available_presets(const std::vector<std::string>& preset_dirs);

}  // namespace pipette
