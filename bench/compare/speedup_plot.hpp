#pragma once
#include <string>
#include <vector>

namespace pipette::bench {

// One series of a speedup-against-cluster-size scatter: a point per case, the median per size
// joined by a line.
struct SpeedupPoint {
  int nodes = 0;
  double speedup = 0;
};

struct SpeedupSeries {
  std::string label;
  std::string colour;  // any SVG colour
  std::vector<SpeedupPoint> points;
};

// A self-contained SVG (no fonts or scripts to fetch): log2 node axis, linear speedup axis with
// the 1.0 line marked, one colour per series.
std::string speedup_svg(const std::string& title, const std::vector<SpeedupSeries>& series,
                        const std::vector<int>& node_counts);

}  // namespace pipette::bench
