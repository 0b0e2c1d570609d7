#include "engine/output_collection.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <limits>

#include "common/strings.h"

namespace drover {

namespace {

// A hold whose store is under way again (its tries kept, so its backoff goes on doubling).
constexpr Millis kStoring = std::numeric_limits<Millis>::max();

// A full disk (or quota) under the store: the machine's, not the run's, and it passes. Told by
// the errno the OS gave, never by the message (which may quote the run's own file names: an
// output named "No space left on device" must not make a real failure wait for ever).
bool NoRoom(const Status& st) {
  return st.code() == Code::kIo && (st.os_error() == ENOSPC || st.os_error() == EDQUOT);
}

}  // namespace

void OutputCollection::Start(CollectJob job) {
  if (!collector_) collector_ = MakeOutputCollector(wake_, off_loop_);
  collecting_.insert(job.run_id);
  ++in_flight_;
  collector_->Start(std::move(job));
}

std::vector<OutputCollection::Due> OutputCollection::TakeDue(Instant now, const Look& look) {
  std::vector<Due> due;
  // Outputs held for want of room are stored again when their retry comes (each pass looks: the
  // loop wakes at least every tail interval), or end cancelled when a cancel came meanwhile.
  for (auto h = holds_.begin(); h != holds_.end();) {
    if (h->second.retry_mono == kStoring) {
      ++h;
      continue;
    }
    const Fate fate = look(h->first);
    if (fate == Fate::kWaiting && now.mono < h->second.retry_mono) {
      ++h;
      continue;
    }
    --in_flight_;  // a held one counts as in flight (the loop stays for it)
    if (fate != Fate::kWaiting) {
      collecting_.erase(h->first);
      if (fate == Fate::kCancelled) due.push_back({h->first, true});
      h = holds_.erase(h);
      continue;
    }
    h->second.retry_mono = kStoring;
    collecting_.erase(h->first);  // Start makes it collecting again
    due.push_back({h->first, false});
    ++h;
  }
  return due;
}

std::vector<OutputCollection::Stored> OutputCollection::TakeFinished(Instant now,
                                                                     const Look& look) {
  std::vector<Stored> out;
  if (!collector_) return out;
  for (CollectDone& done : collector_->TakeFinished()) {
    --in_flight_;
    Retrying held;
    if (auto h = holds_.find(done.run_id); h != holds_.end()) {
      held = h->second;
      holds_.erase(h);
    }
    const Fate fate = look(done.run_id);
    if (fate == Fate::kGone) {
      collecting_.erase(done.run_id);
      continue;
    }
    if (!done.status.ok() && NoRoom(done.status) && fate != Fate::kCancelled) {
      // The run exited 0 and wrote its outputs; the store's disk has no room for them now. That
      // is not the run's failure: it stays as it is, its outputs being stored, and they are
      // stored again after 1 s, doubling to 30 s, until there is room.
      held.Failed(done.status, now);
      spdlog::warn("run {}: its outputs cannot be stored yet ({}); trying again in {}",
                   done.run_id, done.status.message(), FormatDuration(held.backoff_ms));
      holds_[done.run_id] = held;
      ++in_flight_;
      continue;
    }
    if (held.tries > 0) {
      spdlog::info("run {}: its outputs are stored after {} tries held for want of room",
                   done.run_id, held.tries);
    }
    collecting_.erase(done.run_id);
    out.push_back({done.run_id, std::move(done.status), std::move(done.artifacts)});
  }
  return out;
}

}  // namespace drover
