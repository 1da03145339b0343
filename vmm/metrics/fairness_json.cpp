#include "vmm/metrics/fairness_json.h"

namespace lockvisor::metrics {

void add_fairness_factors(nlohmann::json& object, const FairnessFactors& f) {
  object["min_over_max"] = f.min_over_max;
  object["mean_over_max"] = f.mean_over_max;
  object["slowest_half_share"] = f.slowest_half_share;
}

}  // namespace lockvisor::metrics
