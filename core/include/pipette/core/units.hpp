#pragma once
// Unit conventions for the whole core. Every quantity is a double in SI base units and its
// field or variable name ends in the unit: *_bytes, *_seconds, *_bytes_per_second,
// *_flops (FLOP count) and *_flop_per_second (rate). Conversions happen only at the edges
// (loaders, printers) through the constants below, never inline with magic numbers.
// Network gear quotes bits per second; nccl-tests and this project quote bytes per second.

namespace pipette::units {

inline constexpr double kibibyte = 1024.0;
inline constexpr double mebibyte = 1024.0 * kibibyte;
inline constexpr double gibibyte = 1024.0 * mebibyte;
inline constexpr double gigabyte = 1e9;        // GB as used by nccl-tests' GB/s
inline constexpr double gigabit = 1e9 / 8.0;   // Gb (bits) in bytes, as network gear quotes
inline constexpr double teraflop = 1e12;
inline constexpr double microsecond = 1e-6;
inline constexpr double millisecond = 1e-3;

}  // namespace pipette::units
