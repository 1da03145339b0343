// lockvisor bench --knobs: every knob setting runs once per repeat, the
// settings interleaved within a repeat (so that a noisy stretch of the shared
// host hits them all alike); each cell reports the median over repeats, its
// ratio to the baseline (halt polling off, no yield, no boost), and the
// vCPU threads' CPU seconds per run (polling costs CPU).
#include "vmm/cli/bench_knobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "vmm/cli/option_checks.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/machine.h"
#include "vmm/metrics/summary.h"
#include "vmm/report/settings_json.h"
#include "vmm/report/run_report.h"
#include "vmm/util/error.h"
#include "vmm/util/output_file.h"

namespace lockvisor::cli {
namespace {

struct Knob {
  std::string name;
  pvlock::HaltPollSetting poll;
  bool yield = false;
  bool boost = false;
  pvlock::BoostMechanism mechanism = pvlock::BoostMechanism::kOff;
};

struct Placement {
  std::string name;
  std::vector<int> pcpus;
};

struct Workload {
  std::string name;   // pingpong, or the lock's name under lockbench
  bool higher_is_better;
  const char* unit;
};

struct Sample {
  double metric = 0;       // us per hand-off, or ops/s
  double cpu_seconds = 0;  // all vCPU threads
  double wall_seconds = 0;
  double wake_p50_us = 0;
  pvlock::PvCounts pv;
};

struct RunStopped {
  machine::Outcome outcome;
  std::string reason;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

Sample run_one(const kvm::KvmSystem& kvm, std::span<const std::byte> image, const KnobsBenchOptions& o,
               const Workload& w, const Placement& p, const Knob& k) {
  machine::MachineConfig config;
  config.vcpus = 4;
  config.pcpus = p.pcpus;
  config.echo_guest_prints = false;
  config.timeout_s = 300;
  config.backend.halt_poll = k.poll;
  config.backend.kick_yield = k.yield;
  config.backend.kick_boost = k.boost;
  config.backend.boost = k.mechanism;
  if (w.name == "pingpong") {
    config.program = "pingpong";
    config.args = fmt::format("rounds={}", o.pingpong_rounds);
  } else {
    // The lock workloads read only their binary record (BootInfo::workload),
    // made as `run` makes it: production defaults, this lock and length.
    experiment::WorkloadSettings settings;
    settings.workload = config.program = "lockbench";
    settings.lock = w.name;
    settings.duration_s = o.lock_seconds;
    experiment::validate(settings);
    config.workload = experiment::workload_params(settings, config.seed, config.vcpus);
  }
  machine::Machine vm(kvm, config, image);
  const auto run = vm.run();
  if (run.outcome != machine::Outcome::kCompleted) throw RunStopped{run.outcome, run.reason};
  Sample s;
  for (const auto& v : run.vcpus) {
    s.cpu_seconds += v.cpu_seconds;
    s.pv += v.pv;
  }
  s.wall_seconds = run.wall_seconds;
  s.wake_p50_us = report::wake_latency_json(run)["p50"].get<double>() / 1000.0;
  if (w.name == "pingpong") {
    const auto* elapsed = run.result(0, "elapsed_ns");
    if (elapsed == nullptr || elapsed->values.size() != 1) fail_guest("pingpong: no elapsed_ns result");
    s.metric = static_cast<double>(elapsed->values[0]) / 1000.0 / static_cast<double>(o.pingpong_rounds * config.vcpus);
  } else {
    lockstat::LockRun lock_run;
    for (const auto& st : lockstat::workload_stats_from(run)) lock_run.samples.push_back({st, 0, 0, std::nullopt, std::nullopt});
    s.metric = lockstat::to_json(lock_run)["ops_per_sec"].get<double>();
  }
  return s;
}

int knobs_bench(const KnobsBenchOptions& o) {
  const auto kvm = kvm::KvmSystem::open();
  const auto image = embedded_guest_image();
  std::optional<OutputFile> json;
  if (!o.json.empty()) json.emplace(o.json, "--json");

  const auto allowed = host::allowed_cpus();
  std::vector<Placement> placements{{"4 on 1", {allowed[0]}}};
  if (allowed.size() >= 2) placements.push_back({"4 on 2", {allowed[0], allowed[1]}});
  std::vector<Knob> knobs{{"baseline", pvlock::HaltPollSetting::off()},
                          {"fixed:50", pvlock::HaltPollSetting::fixed(50)},
                          {"adaptive:200", pvlock::HaltPollSetting::adaptive(200)},
                          {"yield", pvlock::HaltPollSetting::off(), true},
                          {"adaptive+yield", pvlock::HaltPollSetting::adaptive(200), true}};
  // The boost mechanisms need CAP_SYS_NICE: measured where permitted.
  if (pvlock::resolve_boost_mechanism(pvlock::BoostMechanism::kAuto) == pvlock::BoostMechanism::kFifo) {
    knobs.push_back({"kick-boost:fifo", pvlock::HaltPollSetting::off(), false, true, pvlock::BoostMechanism::kFifo});
    knobs.push_back({"kick-boost:nice", pvlock::HaltPollSetting::off(), false, true, pvlock::BoostMechanism::kNice});
  }
  const std::vector<Workload> workloads{{"pingpong", false, "us/hand-off"}, {"pvqspinlock", true, "ops/s"}};

  nlohmann::json out;
  out["repeats"] = o.repeats;
  out["pingpong_rounds"] = o.pingpong_rounds;
  out["lock_seconds"] = o.lock_seconds;
  fmt::print("host knobs, 4 vCPUs, median of {} interleaved repeats; ratio = baseline-relative (>1: better);\n"
             "cpu-s = vCPU threads' CPU seconds per run; per-cpu = ratio / cpu-ratio (work per CPU second)\n",
             o.repeats);
  for (const auto& w : workloads) {
    for (const auto& p : placements) {
      std::vector<std::vector<Sample>> samples(knobs.size());
      for (unsigned r = 0; r < o.repeats; ++r)
        for (std::size_t k = 0; k < knobs.size(); ++k) samples[k].push_back(run_one(kvm, image, o, w, p, knobs[k]));
      fmt::print("\n{} ({}), {}:\n  {:<15} {:>12} {:>7} {:>7} {:>9} {:>7} {:>9} {:>8} {:>9} {:>7} {:>7}\n", w.name, w.unit, p.name,
                 "knobs", "median", "ratio", "cpu-s", "cpu-ratio", "per-cpu", "wake-p50", "polled", "poll-fail", "yields", "boosts");
      double base_metric = 0, base_cpu = 0;
      for (std::size_t k = 0; k < knobs.size(); ++k) {
        std::vector<double> metric, cpu, wake, polled, failed, yields, boosts;
        for (const auto& s : samples[k]) {
          metric.push_back(s.metric);
          cpu.push_back(s.cpu_seconds);
          wake.push_back(s.wake_p50_us);
          polled.push_back(static_cast<double>(s.pv.halts_polled));
          failed.push_back(static_cast<double>(s.pv.halt_polls_failed));
          yields.push_back(static_cast<double>(s.pv.kick_yields));
          boosts.push_back(static_cast<double>(s.pv.boosts));
        }
        const double m = median(metric), c = median(cpu);
        if (k == 0) base_metric = m, base_cpu = c;
        const double ratio = m == 0 || base_metric == 0 ? 0 : (w.higher_is_better ? m / base_metric : base_metric / m);
        const double cpu_ratio = base_cpu > 0 ? c / base_cpu : 0;
        fmt::print("  {:<15} {:>12.1f} {:>7.2f} {:>7.2f} {:>9.2f} {:>7.2f} {:>7.1f}us {:>8.0f} {:>9.0f} {:>7.0f} {:>7.0f}\n",
                   knobs[k].name, m, ratio, c, cpu_ratio, cpu_ratio > 0 ? ratio / cpu_ratio : 0, median(wake),
                   median(polled), median(failed), median(yields), median(boosts));
        out["cells"].push_back({{"workload", w.name},
                                {"placement", p.name},
                                {"knobs", knobs[k].name},
                                {"halt_poll", pvlock::format_halt_poll(knobs[k].poll)},
                                {"kick_yield", knobs[k].yield},
                                {"kick_boost", knobs[k].boost},
                                {"boost", pvlock::boost_mechanism_name(knobs[k].mechanism)},
                                {"unit", w.unit},
                                {"median", m},
                                {"ratio_to_baseline", ratio},
                                {"values", metric},
                                {"cpu_seconds_median", c},
                                {"cpu_seconds", cpu},
                                {"wake_p50_us_median", median(wake)},
                                {"halts_polled_median", median(polled)},
                                {"halt_polls_failed_median", median(failed)},
                                {"kick_yields_median", median(yields)},
                                {"boosts_median", median(boosts)}});
        std::fflush(stdout);
      }
    }
  }
  if (json) report::write_json_file(*json, out);
  return 0;
}

}  // namespace

std::shared_ptr<KnobsBenchOptions> add_knobs_bench_options(CLI::App& bench) {
  auto o = std::make_shared<KnobsBenchOptions>();
  auto* knobs = bench.add_flag("--knobs", o->enabled,
                               "Instead: compare halt polling (off/fixed/adaptive), kick yield and kick boost on "
                               "pingpong and pvqspinlock lockbench, 4 vCPUs on 1 and 2 host CPUs");
  // Without --knobs these would be ignored: refused instead (CLI11's needs).
  bench.add_option("--knobs-repeats", o->repeats, "--knobs: interleaved repeats per cell (1..100)")
      ->transform(unsigned_in(1, 100))
      ->needs(knobs);
  bench.add_option("--knobs-seconds", o->lock_seconds, "--knobs: length of each lockbench run (0.01..60 s)")
      ->check(seconds_in(0.01, 60))
      ->needs(knobs);
  bench.add_option("--knobs-rounds", o->pingpong_rounds, "--knobs: pingpong turns per vCPU (1..1000000)")
      ->transform(unsigned_in(1, 1000000))
      ->needs(knobs);
  return o;
}

int run_knobs_bench(const KnobsBenchOptions& o) {
  try {
    return knobs_bench(o);
  } catch (const RunStopped& stopped) {
    if (stopped.outcome == machine::Outcome::kInterrupted) {
      fmt::print(stderr, "lockvisor bench: stopped by SIGINT/SIGTERM\n");
    } else {
      fmt::print(stderr, "lockvisor: error: benchmark run failed: {}: {}\n", machine::outcome_name(stopped.outcome),
                 stopped.reason);
    }
    return machine::exit_code(stopped.outcome);
  }
}

}  // namespace lockvisor::cli
