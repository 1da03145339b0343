// A straight line through measurements (ordinary least squares): how a cost
// grows with a size, e.g. bench's start-up per vCPU. With two points it is
// the slope between them; with more, every point weighs alike.
#pragma once
#include <optional>
#include <span>

namespace lockvisor::metrics {

struct LinearFit {
  double slope = 0;      // y per unit of x
  double intercept = 0;  // y at x = 0
};

// The least-squares line of y on x (equal lengths, not checked beyond that);
// nullopt when there are fewer than two distinct x (no slope to speak of).
std::optional<LinearFit> fit_line(std::span<const double> x, std::span<const double> y);

}  // namespace lockvisor::metrics
