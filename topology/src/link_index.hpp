#pragma once
// Internal: the binary index beside a link cache (see read_link_table in link_cache.hpp).
#include <sys/stat.h>

#include <optional>
#include <string>
#include <string_view>

#include "pipette/topology/link_cache.hpp"

namespace pipette {

// The bytes of `path` + ".index" for `table`, stamped with the YAML file's status.
std::string encode_link_index(const LinkTable& table, const struct stat& yaml_status);
// The table, when `bytes` is a well-formed index whose stamp matches `yaml_status`.
std::optional<LinkTable> decode_link_index(std::string_view bytes, const struct stat& yaml_status);

inline std::string link_index_path(const std::string& cache_path) { return cache_path + ".index"; }

}  // namespace pipette
