// The link-measurement cache: parse_link_cache is what read_link_cache runs on the file's contents.
// Beyond not crashing: whatever the reader accepts, the writer writes back in a form the reader
// accepts again with the same entries (update_link_cache relies on it to merge), and the binary
// index update_link_cache writes beside it decodes to the same table.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "link_index.hpp"
#include "pipette/topology/link_cache.hpp"
#include "property.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto cache = pipette::parse_link_cache(text, "fuzz.yaml");
  if (!cache) {
    pipette::fuzz::require_one_line(cache.error().message, text);
    return 0;
  }
  const std::string written = pipette::format_link_cache(*cache);
  const auto reread = pipette::parse_link_cache(written, "rewritten.yaml");
  pipette::fuzz::require(reread.ok(), "format_link_cache output parses again",
                         reread ? std::string_view() : std::string_view(reread.error().message));
  pipette::fuzz::require(reread->nodes.size() == cache->nodes.size() && reread->pairs.size() == cache->pairs.size() &&
                             reread->collectives.size() == cache->collectives.size(),
                         "a rewritten cache keeps every entry", written);
  const auto merged = pipette::merge_link_caches(*cache, *reread);
  pipette::fuzz::require(merged.nodes.size() == cache->nodes.size() && merged.pairs.size() == cache->pairs.size() &&
                             merged.collectives.size() == cache->collectives.size(),
                         "merging a cache with itself keeps one of each entry");

  struct stat stamp {};
  stamp.st_size = static_cast<off_t>(written.size());
  const pipette::LinkTable table = pipette::link_table_of(*cache);
  const auto decoded = pipette::decode_link_index(pipette::encode_link_index(table, stamp), stamp);
  pipette::fuzz::require(decoded.has_value() && decoded->names == table.names && decoded->pairs.size() == table.pairs.size() &&
                             decoded->nodes.size() == table.nodes.size() && decoded->collectives.size() == table.collectives.size(),
                         "the binary index of an accepted cache decodes to the same table");
  return 0;
}
