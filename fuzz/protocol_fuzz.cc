// The protocol's JSON decoders, as the server and the clients use them: any bytes as a request or
// response body. A value that decodes must encode back to JSON that decodes again.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "protocol/api.h"
#include "protocol/json_codec.h"

namespace {

using drover::Json;

template <typename Decode, typename Encode>
void RoundTrip(const Json& j, Decode decode, Encode encode) {
  auto first = decode(j);
  if (!first.ok()) {
    (void)first.status().message().size();
    return;
  }
  Json again = encode(*first);
  (void)again.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (!decode(again).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace drover;
  using namespace drover::protocol;
  Json j = Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  auto enc = [](const auto& v) { return ToJson(v); };
  RoundTrip(j, SubmitRequestFromJson, enc);
  RoundTrip(j, SubmitResponseFromJson, enc);
  RoundTrip(j, GpuSampleFromJson, enc);
  RoundTrip(j, GpuStatusFromJson, enc);
  RoundTrip(j, AlertFromJson, enc);
  RoundTrip(j, RunDetailFromJson, enc);
  RoundTrip(j, ExperimentFromJson, enc);
  RoundTrip(j, RunFromJson, enc);
  RoundTrip(j, AttemptFromJson, enc);
  RoundTrip(j, MetricPointFromJson, enc);
  (void)PriorityRequestFromJson(j);
  (void)StatusFromErrorJson(j, 400).message().size();
  return 0;
}
