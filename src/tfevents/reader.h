#pragma once
// TensorBoard event files (`events.out.tfevents.*`) read as metric points: docs/metrics.md,
// "TensorBoard logs". A file is a sequence of TFRecords, each an Event protocol buffer; the
// scalars in its summaries (a `simple_value`, or a one-element numeric `tensor` as TF2 and newer
// PyTorch writers emit) are the points. A reader keeps a byte offset, like the stdout reader, so
// each record is read once and a restarted engine resumes where it stopped.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace drover::tfevents {

struct Scalar {
  std::string_view tag;  // valid during the callback only
  int64_t step = 0;
  double wall_time = 0;  // seconds since the epoch, as the writer recorded it
  double value = 0;
};

// Bounds of one read: memory stays within `max_read` (plus one record up to `max_record`)
// whatever the file holds.
struct ReadLimits {
  int64_t max_read = 8 << 20;  // bytes read per call (at a record boundary), then the next call
  // Records longer than this (images, graphs, embeddings: never a scalar) are stepped over
  // without being read or checked.
  int64_t max_record = 1 << 20;
};

struct ReadProgress {
  int64_t offset = 0;   // where the next read starts: after the last whole record
  int64_t records = 0;  // records read whole in this call
  int64_t scalars = 0;
  // Records whose checksum or encoding is wrong (skipped; the reader goes on after them), and
  // bytes passed over to find the next record after a damaged length.
  int64_t corrupt = 0;
  int64_t skipped_bytes = 0;
  int64_t large = 0;   // records over max_record, stepped over
  bool more = false;   // stopped at max_read: more whole records may follow
  // The file ends inside a record: a writer is still writing it (it is waited for) or, when
  // `final`, it was torn by a crash (counted in corrupt, and the offset moves to the end).
  bool torn = false;
};

// Parses the records of `data`, which starts at byte `base` of a file and holds everything the
// file has up to `file_size` at most. Records that end past `data` are left for the next call.
ReadProgress ParseRecords(std::string_view data, int64_t base, bool final,
                          const std::function<void(const Scalar&)>& on_scalar,
                          int64_t max_record = ReadLimits{}.max_record);

// Reads `fd` (a regular file) from `offset`: reads at most limits.max_read bytes and calls
// `on_scalar` for each scalar of each whole record. `final`: the writer has ended, so a record
// cut short at the end is torn, not pending.
Result<ReadProgress> ReadScalars(int fd, int64_t offset, bool final,
                                 const std::function<void(const Scalar&)>& on_scalar,
                                 const ReadLimits& limits = {});

// Whether a file name is an event file's (`events.out.tfevents.<time>.<host>...`, or exactly
// `events.out.tfevents` as some writers name it).
bool IsEventFileName(std::string_view name);

}  // namespace drover::tfevents
