// The binary index beside a link cache (topology/src/link_index.hpp), which read_link_table
// trusts instead of the YAML when its stamp matches the YAML file's size, mtime, inode and device.
// The target stamps a status that matches whatever the input's header says, so that the fuzzer
// reaches the decoding past the stamp check, as a stale or forged index on disk would.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "link_index.hpp"
#include "property.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  struct stat status {};
  // Header layout: magic[8], version, reserved, yaml_size, yaml_mtime_ns, yaml_inode, yaml_device.
  if (size >= 48) {
    std::uint64_t yaml_size = 0, inode = 0, device = 0;
    std::int64_t mtime_ns = 0;
    std::memcpy(&yaml_size, data + 16, 8);
    std::memcpy(&mtime_ns, data + 24, 8);
    std::memcpy(&inode, data + 32, 8);
    std::memcpy(&device, data + 40, 8);
    status.st_size = static_cast<off_t>(yaml_size);
    // Truncating division keeps |seconds × 1e9| <= |mtime_ns|, so the decoder's seconds × 1e9 +
    // nanoseconds gives mtime_ns back without overflow (nanoseconds may be negative here).
    status.st_mtim.tv_sec = static_cast<time_t>(mtime_ns / 1000000000);
    status.st_mtim.tv_nsec = static_cast<long>(mtime_ns % 1000000000);
    status.st_ino = static_cast<ino_t>(inode);
    status.st_dev = static_cast<dev_t>(device);
  }
  const auto table = pipette::decode_link_index(bytes, status);
  if (!table) return 0;
  for (const auto& pair : table->pairs)
    pipette::fuzz::require(pair.node_a < table->names.size() && pair.node_b < table->names.size(),
                           "a decoded pair names nodes of the table");
  for (const auto& node : table->nodes)
    pipette::fuzz::require(node.name < table->names.size() &&
                               node.bandwidth_bytes_per_second.size() == static_cast<std::size_t>(node.gpus) * node.gpus,
                           "a decoded node has a name and a gpus × gpus matrix");
  return 0;
}
