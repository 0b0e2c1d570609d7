#include "engine/recovery.h"

#include <fmt/format.h>

#include <algorithm>

namespace drover {

bool LooksLikeCudaOom(std::string_view text) {
  static constexpr std::string_view kMarkers[] = {
      "CUDA out of memory",
      "torch.cuda.OutOfMemoryError",
      "OutOfMemoryError: CUDA",
      "CUBLAS_STATUS_ALLOC_FAILED",
      "CUDNN_STATUS_ALLOC_FAILED",
      "cudaErrorMemoryAllocation",
      "CUDA_ERROR_OUT_OF_MEMORY",
      "RESOURCE_EXHAUSTED: Out of memory",  // JAX / XLA
      "out of memory trying to allocate",
  };
  return std::any_of(std::begin(kMarkers), std::end(kMarkers),
                     [&](std::string_view m) { return text.find(m) != std::string_view::npos; });
}

AttemptOutcome ClassifyExit(const ExitFacts& f) {
  if (f.signal == 0 && f.exit_code == 0) return AttemptOutcome::kSucceeded;
  if (LooksLikeCudaOom(f.stderr_tail)) return AttemptOutcome::kCudaOom;
  if (f.signal != 0) return AttemptOutcome::kSignal;
  return AttemptOutcome::kExitCode;
}

namespace {

constexpr Millis kMaxBackoffMs = 5 * 60 * 1000;

Recovery Fail(std::string note) {
  Recovery r;
  r.event = RunEvent::kFail;
  r.note = std::move(note);
  return r;
}

}  // namespace

Streak StreakOf(std::optional<AttemptOutcome> outcome) {
  if (!outcome) return Streak::kNeutral;  // not ended yet
  switch (*outcome) {
    case AttemptOutcome::kExitCode:
    case AttemptOutcome::kSignal:
    case AttemptOutcome::kTimeout:
    case AttemptOutcome::kStalled:
    case AttemptOutcome::kLaunchError:
    case AttemptOutcome::kDiverged:
      return Streak::kFailure;
    case AttemptOutcome::kCudaOom:
    case AttemptOutcome::kInterrupted:
    case AttemptOutcome::kPreempted:
    case AttemptOutcome::kCancelled:
    case AttemptOutcome::kPruned:
      return Streak::kNeutral;
    case AttemptOutcome::kSucceeded:
      return Streak::kBreaks;
  }
  return Streak::kBreaks;
}


Recovery DecideRecovery(const Spec& spec, const Json& params, int retries_used,
                        AttemptOutcome outcome) {
  Recovery r;
  switch (outcome) {
    case AttemptOutcome::kSucceeded:
      r.event = RunEvent::kSucceed;
      return r;
    case AttemptOutcome::kCancelled:
      r.event = RunEvent::kCancel;
      return r;
    case AttemptOutcome::kPruned:
      // The prune rule stopped it: final, and not a failure (the search counts its value).
      r.event = RunEvent::kPrune;
      return r;
    case AttemptOutcome::kInterrupted:
      // Not the run's fault: it goes back to the queue at once and spends no retry.
      r.event = RunEvent::kRetry;
      r.next_params = params;
      r.note = "requeued";
      return r;
    case AttemptOutcome::kPreempted:
      // The scheduler took its GPUs: back to the queue at once, spending no retry (the GPU time
      // it had still counts for the policy, which is what lets it wait its turn).
      r.event = RunEvent::kRetry;
      r.next_params = params;
      r.note = "requeued";
      return r;
    case AttemptOutcome::kDiverged:
      // The same config diverges again: retrying only burns GPU time.
      return Fail("a watched metric became NaN or infinite: the run diverged");
    case AttemptOutcome::kLaunchError:
      // The same command would fail the same way: retrying only hides the error. The launch
      // error itself already says what went wrong.
      return Fail("");
    default:
      break;
  }

  if (outcome == AttemptOutcome::kCudaOom && spec.oom.enabled()) {
    const auto it = params.find(spec.oom.param);
    if (it == params.end() || !it->is_number_integer()) {
      return Fail(
          fmt::format("CUDA OOM, and {} is not an integer parameter to halve", spec.oom.param));
    }
    int64_t current = it->get<int64_t>();
    int64_t next = current / 2;
    if (next < spec.oom.min || next < 1) {
      return Fail(fmt::format("CUDA OOM at {}={}, and halving would go below oom.min={}",
                              spec.oom.param, current, spec.oom.min));
    }
    r.event = RunEvent::kRetry;
    r.next_params = params;
    r.next_params[spec.oom.param] = next;
    r.note = fmt::format("CUDA OOM: {} {} -> {}", spec.oom.param, current, next);
    if (!spec.oom.accumulate.empty()) {
      auto acc = params.find(spec.oom.accumulate);
      int64_t a = (acc != params.end() && acc->is_number_integer()) ? acc->get<int64_t>() : 1;
      r.next_params[spec.oom.accumulate] = a * 2;
      r.note += fmt::format(", {} {} -> {}", spec.oom.accumulate, a, a * 2);
    }
    return r;
  }

  if (retries_used >= spec.retries) {
    return Fail(spec.retries == 0 ? "no retries configured"
                 : spec.retries == 1  ? std::string("its 1 retry used")
                                      : fmt::format("all {} retries used", spec.retries));
  }
  r.event = RunEvent::kRetry;
  r.counts_as_retry = true;
  r.next_params = params;
  Millis backoff = spec.retry_backoff_ms;
  for (int i = 0; i < retries_used && backoff < kMaxBackoffMs; ++i) backoff *= 2;
  r.delay_ms = std::min(backoff, kMaxBackoffMs);
  r.note = fmt::format("retry {}/{} after {} ms", retries_used + 1, spec.retries, r.delay_ms);
  return r;
}

}  // namespace drover
