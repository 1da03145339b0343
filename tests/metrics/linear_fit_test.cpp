// metrics::fit_line against hand-computed least-squares lines.
#include <gtest/gtest.h>

#include <vector>

#include "vmm/metrics/linear_fit.h"

namespace lockvisor::metrics {
namespace {

TEST(LinearFit, TwoPointsGiveTheSlopeBetweenThem) {
  const std::vector<double> x{1, 256}, y{10, 10 + 255 * 4.5};
  const auto fit = fit_line(x, y);
  ASSERT_TRUE(fit.has_value());
  EXPECT_DOUBLE_EQ(fit->slope, 4.5);
  EXPECT_DOUBLE_EQ(fit->intercept, 5.5);
}

TEST(LinearFit, ScatteredPointsGiveTheLeastSquaresLine) {
  // x 0..3, y 1, 3, 2, 6: mean x 1.5, mean y 3; Sxy = 7, Sxx = 5.
  const std::vector<double> x{0, 1, 2, 3}, y{1, 3, 2, 6};
  const auto fit = fit_line(x, y);
  ASSERT_TRUE(fit.has_value());
  EXPECT_DOUBLE_EQ(fit->slope, 1.4);
  EXPECT_DOUBLE_EQ(fit->intercept, 3 - 1.4 * 1.5);
}

TEST(LinearFit, NoSlopeWithoutTwoDistinctX) {
  EXPECT_FALSE(fit_line(std::vector<double>{}, std::vector<double>{}).has_value());
  EXPECT_FALSE(fit_line(std::vector<double>{64}, std::vector<double>{1}).has_value());
  EXPECT_FALSE(fit_line(std::vector<double>{64, 64}, std::vector<double>{1, 2}).has_value());
}

}  // namespace
}  // namespace lockvisor::metrics
