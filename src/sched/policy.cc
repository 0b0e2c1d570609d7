#include "sched/policy.h"

#include "common/strings.h"
#include "sched/gittins.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace drover::sched {

std::string_view ToString(PolicyKind k) {
  switch (k) {
    case PolicyKind::kFifo: return "fifo";
    case PolicyKind::kPriority: return "priority";
    case PolicyKind::kLas: return "las";
    case PolicyKind::kSrtf: return "srtf";
    case PolicyKind::kGittins: return "gittins";
    case PolicyKind::kDefault: return "default";
  }
  return "fifo";
}

PolicyConfig ForPolicy(PolicyKind k) {
  PolicyConfig p;
  p.kind = k;
  if (k == PolicyKind::kDefault) p.preempt_above_allocated = 0.5;
  return p;
}

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (PolicyKind k : {PolicyKind::kFifo, PolicyKind::kPriority, PolicyKind::kLas,
                         PolicyKind::kSrtf, PolicyKind::kGittins, PolicyKind::kDefault}) {
      v.emplace_back(ToString(k));
    }
    return v;
  }();
  return names;
}

Result<PolicyKind> ParsePolicy(std::string_view name) {
  for (PolicyKind k : {PolicyKind::kFifo, PolicyKind::kPriority, PolicyKind::kLas,
                       PolicyKind::kSrtf, PolicyKind::kGittins, PolicyKind::kDefault}) {
    if (ToString(k) == name) return k;
  }
  std::optional<std::string> close = ClosestMatch(name, PolicyNames());
  return InvalidArgument(fmt::format(
      "no scheduling policy '{}'; choose fifo, priority, las, srtf, gittins or default{}", name,
      close ? fmt::format("; did you mean '{}'?", *close) : ""));
}

bool Preemptive(PolicyKind k) {
  return k == PolicyKind::kLas || k == PolicyKind::kSrtf || k == PolicyKind::kGittins ||
         k == PolicyKind::kDefault;
}

namespace {

constexpr double kUnknown = std::numeric_limits<double>::infinity();

Rank Las(const PolicyConfig& p, const RankInput& r) {
  return {r.attained_gpu_ms >= p.las_threshold_gpu_ms ? 1.0 : 0.0, static_cast<double>(r.seq)};
}

Rank Srtf(const RankInput& r) {
  if (!r.predicted_ms) return {kUnknown, static_cast<double>(r.seq)};
  double ran = static_cast<double>(r.attained_gpu_ms) / std::max(1, r.gpus);
  return {std::max(0.0, static_cast<double>(*r.predicted_ms) - ran), static_cast<double>(r.seq)};
}

}  // namespace

Rank RankOf(const PolicyConfig& p, const RankInput& r) {
  switch (p.kind) {
    case PolicyKind::kFifo:
      return {-static_cast<double>(r.priority), static_cast<double>(r.seq)};
    case PolicyKind::kPriority: {
      double predicted_h = r.predicted_ms ? static_cast<double>(*r.predicted_ms) / 3.6e6 : 1.0;
      double score = r.priority * 0.6 + (1.0 - std::min(predicted_h, 1.0)) * 0.4 +
                     p.aging_per_hour * static_cast<double>(r.waited_ms) / 3.6e6;
      return {-score, static_cast<double>(r.seq)};
    }
    case PolicyKind::kLas:
      return Las(p, r);
    case PolicyKind::kSrtf:
      return Srtf(r);
    case PolicyKind::kGittins:
      if (p.gittins && p.gittins->ready()) {
        // The index moves only at steps of attained service, so a run keeps its place for a
        // while; FIFO among equals.
        return {-p.gittins->Index(r.attained_gpu_ms), static_cast<double>(r.seq)};
      }
      return Las(p, r);
    case PolicyKind::kDefault: {
      // The user's priority first. Then the estimated remaining run time: the prediction minus
      // what it has run; once a run outlives its prediction, twice what it has run (run times
      // are heavy-tailed: under a Pareto tail of index 1.5 the expected remainder is twice the
      // age); without a prediction, what it has run, at least an hour. Estimates go in classes
      // 1.41x wide (1-1.41 h, 1.41-2 h, 2-2.83 h, ...), FIFO within a class, so an estimate that
      // wobbles does not reorder the queue, and runs of one class never preempt each other.
      // docs/scheduling.md says what else was tried.
      double ran_h = static_cast<double>(r.attained_gpu_ms) / std::max(1, r.gpus) / 3.6e6;
      double left_h = std::max(ran_h, 1.0);
      if (r.predicted_ms) {
        double predicted_h = static_cast<double>(*r.predicted_ms) / 3.6e6;
        left_h = predicted_h > ran_h ? predicted_h - ran_h : 2 * ran_h;
      }
      double x = std::max(left_h, 1.0 / 64);
      double cls = std::ilogb(x * x);  // floor(2 log2(left)): classes 1.41x wide
      return {-static_cast<double>(r.priority) * 1e3 + cls, static_cast<double>(r.seq)};
    }
  }
  return {0, static_cast<double>(r.seq)};
}

}  // namespace drover::sched
