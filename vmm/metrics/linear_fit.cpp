#include "vmm/metrics/linear_fit.h"

#include <algorithm>
#include <cstddef>

namespace lockvisor::metrics {

std::optional<LinearFit> fit_line(std::span<const double> x, std::span<const double> y) {
  const std::size_t n = std::min(x.size(), y.size());
  if (n < 2) return std::nullopt;
  double mean_x = 0, mean_y = 0;
  for (std::size_t i = 0; i < n; ++i) {
    mean_x += x[i];
    mean_y += y[i];
  }
  mean_x /= static_cast<double>(n);
  mean_y /= static_cast<double>(n);
  // Centred sums: no cancellation between large sums of squares.
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mean_x) * (x[i] - mean_x);
    sxy += (x[i] - mean_x) * (y[i] - mean_y);
  }
  if (sxx == 0) return std::nullopt;
  const double slope = sxy / sxx;
  return LinearFit{slope, mean_y - slope * mean_x};
}

}  // namespace lockvisor::metrics
