// /api/v1/events: server-sent events from EngineControl::WaitEvents. Each event is
//   id: <seq>\nevent: <kind>\ndata: <json>\n\n
// and a client resumes with Last-Event-ID (browsers send it on reconnect) or ?after=<seq>. On a
// shared daemon each reader sees of another user's runs what RedactedEvent leaves.
#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include "server/connection_gate.h"
#include "server/routes.h"

namespace drover::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

// How long one WaitEvents call may block: Stop() and the keepalive are checked between calls.
constexpr int64_t kWaitSliceMs = 250;

struct StreamState {
  Caller caller;  // who reads the stream: what of other users' runs it is shown
  std::map<int64_t, std::string> run_owners;  // run id -> submitter, as looked up
  int64_t after = 0;
  bool started = false;
  SteadyClock::time_point last_write = SteadyClock::now();
  std::shared_ptr<void> slot;  // the long-poll slot, freed with the response
};

// An SSE field value must be one line.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

std::string Frame(const StreamEvent& e, const Json& data) {
  return "id: " + std::to_string(e.seq) + "\nevent: " + OneLine(e.kind) +
         "\ndata: " + DumpJson(data) + "\n\n";
}

int64_t IdIn(const Json& data, const char* key) {
  if (!data.is_object()) return 0;
  auto it = data.find(key);
  return it != data.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// Whose run or experiment an event is about: the daemon names the submitter ("user") in what it
// publishes about runs; an alert names only its run or experiment, looked up in the store.
// Nothing when it is about no one's (a GPU's telemetry, an idle GPU); "" when the owner cannot be
// found, which only an admin may read.
std::optional<std::string> OwnerOf(ServerContext& ctx, StreamState& state, const StreamEvent& e) {
  if (e.data.is_object()) {
    auto user = e.data.find("user");
    if (user != e.data.end() && user->is_string()) return user->get<std::string>();
  }
  if (const int64_t run_id = IdIn(e.data, "run_id"); run_id > 0) {
    auto known = state.run_owners.find(run_id);
    if (known != state.run_owners.end()) return known->second;
    auto run = LoadRun(ctx, run_id);
    if (!run.ok()) return std::string();
    if (state.run_owners.size() > 10000) state.run_owners.clear();
    state.run_owners[run_id] = run->user;
    return run->user;
  }
  if (const int64_t experiment_id = IdIn(e.data, "experiment_id"); experiment_id > 0) {
    auto store = ctx.ThreadStore();
    if (!store.ok()) return std::string();
    auto exp = (*store)->GetExperiment(experiment_id);
    if (!exp.ok() || !exp->has_value()) return std::string();
    return (*exp)->user;
  }
  return std::nullopt;
}

// The event as this stream's reader may see it: all of it about their own runs (an admin: every
// run's), RedactedEvent about another user's.
Json ShownTo(ServerContext& ctx, StreamState& state, const StreamEvent& e) {
  if (state.caller.admin || e.kind == "gpu") return e.data;
  std::optional<std::string> owner = OwnerOf(ctx, state, e);
  if (!owner || MayActOn(state.caller, *owner, "read").ok()) return e.data;
  return RedactedEvent(e.kind, e.data);
}

Status Events(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  int64_t after = 0;
  if (req.has_header("Last-Event-ID")) {
    std::string text = req.get_header_value("Last-Event-ID");
    auto v = ParseInt64(text);
    if (!v || *v < 0) {
      return InvalidArgument("Last-Event-ID must be a non-negative integer, got '" + text + "'");
    }
    after = *v;
  } else {
    DROVER_ASSIGN_OR_RETURN(auto a, QueryInt(req, "after", 0, INT64_MAX));
    after = a ? *a : ctx.engine.LastEventSeq();  // no cursor: only what happens from now on
  }
  auto state = std::make_shared<StreamState>();
  state->caller = CurrentCaller();
  state->after = after;
  state->slot = ctx.AcquireLongPoll();
  if (!state->slot) {
    return Unavailable("too many event streams and log follows are open (" +
                       std::to_string(ctx.MaxLongPolls()) + "); retry in a moment");
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [&ctx, state](size_t, httplib::DataSink& sink) -> bool {
        // A stream lasts as long as its client reads it (a client that stops reading is dropped
        // by the write timeout): no deadline on its connection.
        ConnectionGate::Unbounded();
        try {
          std::string out;
          if (!state->started) {
            state->started = true;
            // Tells EventSource how soon to reconnect, and the client that the stream is open.
            out = "retry: 2000\n: stream after " + std::to_string(state->after) + "\n\n";
            state->last_write = SteadyClock::now();
            return sink.write(out.data(), out.size());
          }
          if (ctx.stopping) {
            sink.done();
            return true;
          }
          auto since_write = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 SteadyClock::now() - state->last_write)
                                 .count();
          int64_t slice =
              std::clamp<int64_t>(ctx.options.keepalive_ms - since_write, 1, kWaitSliceMs);
          auto t0 = SteadyClock::now();
          std::vector<StreamEvent> events = ctx.engine.WaitEvents(state->after, slice);
          for (const auto& e : events) {
            if (e.seq <= state->after) continue;
            if (e.seq > state->after + 1) {
              // The engine's buffer no longer holds what came between: say so, so a client can
              // reload the state it shows.
              out += "event: gap\ndata: " + DumpJson({{"after", state->after}, {"next", e.seq}}) +
                     "\n\n";
            }
            out += Frame(e, ShownTo(ctx, *state, e));
            state->after = e.seq;
          }
          auto now = SteadyClock::now();
          if (out.empty()) {
            if (now - state->last_write >= std::chrono::milliseconds(ctx.options.keepalive_ms)) {
              out = ": keepalive\n\n";
            } else if (now - t0 < std::chrono::milliseconds(5)) {
              // WaitEvents returned at once with nothing: do not spin.
              std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
          }
          if (out.empty()) return true;
          state->last_write = now;
          // A client that went away makes the write fail, which ends the stream.
          return sink.write(out.data(), out.size());
        } catch (...) {
          return false;
        }
      });
  return Status::Ok();
}

}  // namespace

void RegisterEventsRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(std::string(protocol::kApiPrefix) + "/events", Route(ctx, Events));
}

}  // namespace drover::server
