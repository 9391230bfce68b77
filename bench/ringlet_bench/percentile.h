// Percentiles of per-op times: linear interpolation between the two nearest
// ranks of the sorted sample (numpy's default, so p50 is the median, halfway
// between the middle two of an even count). Empty sample: 0.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace ringlet::bench {

// p in [0, 100].
inline double percentile(std::vector<double> sample, double p) {
  if (sample.empty()) return 0;
  std::sort(sample.begin(), sample.end());
  const double pos = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sample.size() - 1);
  const auto below = static_cast<size_t>(std::floor(pos));
  const size_t above = std::min(below + 1, sample.size() - 1);
  const double t = pos - static_cast<double>(below);
  return sample[below] + (sample[above] - sample[below]) * t;
}

}  // namespace ringlet::bench
