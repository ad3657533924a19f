#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "pipette/core/result.hpp"

namespace pipette {

// Slurm hostlist expressions, with the semantics of Slurm 22.05's hostlist.c as observed through
// `scontrol show hostnames` / `scontrol show hostlist` (the tests use scontrol as the oracle).
//
// Expansion: items are separated by commas or whitespace; each item is literal text with any
// number of bracket groups, `gpu[01-03,7]`, `rack[1-2]-n[1-2]`; several groups form a cartesian
// product with the last group varying fastest. A range `lo-hi` takes its zero padding from `lo`
// (`n[008-11]` → n008 … n011). Order and duplicates are kept, as Slurm keeps them.
//
// Deliberate differences from Slurm, all on inputs Slurm mangles rather than rejects: an unclosed
// or stray bracket (`n[1-2`, `n1]`) is an error here, where Slurm yields odd names ("n]", "n1]").
// Like Slurm, one range may hold at most 65536 hosts; an expression may expand to at most
// kMaxExpandedHosts names in all, so a hostile `a[0-65535]b[0-65535]` is an error, not 4 billion names,
// and no name may be longer than kMaxHostNameLength (a DNS name has at most 253 characters), so an
// expansion holds at most about 300 MB whatever the input.
inline constexpr std::size_t kMaxHostsPerRange = 65536;
inline constexpr std::size_t kMaxExpandedHosts = 1u << 20;
inline constexpr std::size_t kMaxHostNameLength = 255;

Result<std::vector<std::string>> expand_hostlist(std::string_view expression);

// Compression, as Slurm's hostlist_ranged_string: hosts stay in the given order; a host whose
// number is one more than the previous host's (same prefix, compatible zero padding) extends that
// range; consecutive ranges with one prefix share a bracket: gpu01,gpu02,gpu03,gpu7 → gpu[01-03,7].
// The number is the trailing run of digits, so rack1-n1,rack1-n2 → rack1-n[1-2] (Slurm does not
// build multi-bracket names either). expand_hostlist(compress_hostlist(h)) == h for any valid names.
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace pipette
