// The fairness-factor readings (summary.h) as the JSON keys every report
// puts beside Jain's index: min_over_max, mean_over_max, slowest_half_share.
// One place for the key names, so lock runs and Linux guest runs agree.
#pragma once
#include <nlohmann/json.hpp>

#include "vmm/metrics/summary.h"

namespace lockvisor::metrics {

// Adds the three keys to `object` (a JSON object, e.g. a report's "fairness").
void add_fairness_factors(nlohmann::json& object, const FairnessFactors& f);

}  // namespace lockvisor::metrics
