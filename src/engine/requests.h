#pragma once
// Asking a foreground engine (`drover run` with no daemon serving its store) from another
// terminal: `drover cancel` writes a request file into <store>/requests/, the engine looks there
// a few times a second, carries it out and answers beside it (<name>.done). Files, not signals:
// whatever else holds the store's engine lock (drover gc, an older drover) is never disturbed.
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace drover {

struct EngineRequest {
  std::vector<int64_t> cancel_runs;
  int64_t cancel_experiment = 0;  // 0: none
};

// How often a foreground engine looks for requests.
inline constexpr Millis kRequestPollMs = 250;
// The most requests taken in one look (the rest wait for the next).
inline constexpr size_t kMaxRequestsPerLook = 64;

// Writes the request (atomically: a temporary file renamed) and returns its name.
Result<std::string> PostEngineRequest(const std::string& store_dir, const EngineRequest& request,
                                      Millis now);
// The requests waiting, oldest first, each with its name; one that cannot be read is answered
// with the reason and dropped.
std::vector<std::pair<std::string, EngineRequest>> TakeEngineRequests(const std::string& store_dir);
// The engine's answer to `name`: ok, or why it was refused. Deletes the request.
void AnswerEngineRequest(const std::string& store_dir, const std::string& name, const Status& st);
// Waits up to `timeout_ms` for the answer; Unavailable when none came (the request is
// withdrawn then, so a later engine does not act on it).
Status AwaitEngineAnswer(const std::string& store_dir, const std::string& name, Millis timeout_ms);
// Drops every request and answer: what an engine finds at its start is not for it.
void ClearEngineRequests(const std::string& store_dir);

}  // namespace drover
