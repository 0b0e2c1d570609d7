#pragma once
// Writes TensorBoard event files: what `drover tensorboard` lays out from stored metrics, so
// TensorBoard shows every run's curves whatever wrote them (drover.log lines, event files,
// derived metrics).
#include <cstdint>
#include <string>
#include <string_view>

namespace drover::tfevents {

// Appends framed records to `out` (the bytes of one event file).
class EventWriter {
 public:
  explicit EventWriter(std::string* out) : out_(out) {}
  // The first record of a file, as TensorBoard's own writers put it: "brain.Event:2".
  void FileVersion(double wall_time);
  // One scalar as a simple_value summary (what TensorBoard's scalar dashboard reads).
  void Scalar(double wall_time, int64_t step, std::string_view tag, double value);

 private:
  void Record(const std::string& data);
  std::string* out_;
};

}  // namespace drover::tfevents
