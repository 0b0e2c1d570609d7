// /api/v1/gpus: the engine's live view of its GPUs, with each one's health and drain
// (docs/metrics.md, "GPU health"); admins drain and clear GPUs (POST /gpus/{index}/drain,
// /gpus/{index}/clear), which the engine reads back from the drain book within a second.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "common/clock.h"
#include "common/strings.h"
#include "gpu/drain_book.h"
#include "gpu/health_json.h"
#include "server/routes.h"

namespace drover::server {
namespace {

std::string BookPath(const ServerContext& ctx) {
  return DrainBookPath(std::filesystem::path(ctx.options.store_path).parent_path().string());
}

// How the book names a GPU (the engine's DeviceKey): its UUID, or its index without one.
std::string KeyOf(const protocol::GpuStatus& g) {
  return g.uuid.empty() ? "index:" + std::to_string(g.index) : g.uuid;
}

Json DrainJson(const DrainEntry& e) {
  return {{"reason", e.reason}, {"by", e.by}, {"since_ms", e.since_ms}, {"kind", e.kind}};
}

Status Gpus(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  Result<DrainBook> book = ReadDrainBook(BookPath(ctx));
  Json out = Json::array();
  for (const auto& g : ctx.engine.Gpus()) {
    Json j = protocol::ToJson(g);
    j["health"] = g.telemetry ? HealthToJson(*g.telemetry) : Json(nullptr);
    const DrainEntry* e = book.ok() ? book->Find(KeyOf(g)) : nullptr;
    j["drained"] = e ? DrainJson(*e) : Json(nullptr);
    out.push_back(std::move(j));
  }
  Json body = {{"gpus", out}};
  if (!book.ok()) body["drain_error"] = book.status().message();
  SendJson(res, 200, body);
  return Status::Ok();
}

// Stored telemetry: one averaged row per GPU per period (watch config telemetry.store_every).
Status GpuSamples(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(auto gpu, QueryInt(req, "gpu", 0, 1024));
  DROVER_ASSIGN_OR_RETURN(auto since, QueryInt(req, "since_ms", 0, INT64_MAX));
  DROVER_ASSIGN_OR_RETURN(auto limit, QueryInt(req, "limit", 1, 100000));
  DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
  DROVER_ASSIGN_OR_RETURN(auto rows, store->ListGpuSamples(gpu ? static_cast<int>(*gpu) : -1,
                                                           since.value_or(0),
                                                           static_cast<int>(limit.value_or(10000))));
  Json out = Json::array();
  for (const auto& s : rows) out.push_back(protocol::ToJson(s));
  SendJson(res, 200, {{"samples", out}});
  return Status::Ok();
}

// The devices GPU `text` names: the device of that index, or each MIG instance of the GPU of
// that index.
Result<std::vector<std::pair<std::string, int>>> Resolve(ServerContext& ctx,
                                                         const std::string& text) {
  std::optional<int64_t> n = ParseInt64(text);
  if (!n || *n < 0) {
    return InvalidArgument(fmt::format("GPU index must be a whole number from 0, got '{}'", text));
  }
  const std::vector<protocol::GpuStatus> gpus = ctx.engine.Gpus();
  std::vector<std::pair<std::string, int>> out;
  for (const auto& g : gpus) {
    if (g.index == *n) out.emplace_back(KeyOf(g), g.index);
  }
  if (out.empty()) {
    for (const auto& g : gpus) {
      if (g.telemetry && g.telemetry->parent_index == *n) out.emplace_back(KeyOf(g), g.index);
    }
  }
  if (out.empty()) {
    std::vector<std::string> have;
    for (const auto& g : gpus) have.push_back(std::to_string(g.index));
    return NotFound(fmt::format("this daemon has no GPU {}{}", *n,
                                have.empty() ? std::string(" (it has none)")
                                             : " (its GPUs: " + Join(have, ", ") +
                                                   "; drover gpu ls)"));
  }
  return out;
}

Status RequireAdmin(std::string_view what) {
  if (CurrentCaller().admin) return Status::Ok();
  return PermissionDenied(fmt::format("{} may not {} GPUs: only the daemon's admins may "
                                      "(lab.admin_group; docs/lab-server.md)",
                                      DisplayName(CurrentCaller().user), what));
}

Json Indices(const std::vector<int>& v) { return Json(v); }

Status Drain(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_RETURN_IF_ERROR(RequireAdmin("drain"));
  DROVER_ASSIGN_OR_RETURN(auto devices, Resolve(ctx, req.matches[1].str()));
  std::string reason;
  if (!req.body.empty()) {
    DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
    if (body.contains("reason")) {
      if (!body["reason"].is_string()) return InvalidArgument("'reason' must be a string");
      reason = body["reason"].get<std::string>();
      if (reason.size() > 1000) return InvalidArgument("'reason' is longer than 1000 characters");
    }
  }
  DROVER_ASSIGN_OR_RETURN(std::vector<int> done,
                          DrainGpus(BookPath(ctx), devices, reason,
                                    DisplayName(CurrentCaller().user), ctx.clock.Now()));
  std::vector<int> already;
  for (const auto& [key, index] : devices) {
    if (std::find(done.begin(), done.end(), index) == done.end()) already.push_back(index);
  }
  SendJson(res, 200, {{"drained", Indices(done)}, {"already_drained", Indices(already)}});
  return Status::Ok();
}

Status Clear(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_RETURN_IF_ERROR(RequireAdmin("clear"));
  DROVER_ASSIGN_OR_RETURN(auto devices, Resolve(ctx, req.matches[1].str()));
  DROVER_ASSIGN_OR_RETURN(std::vector<int> done,
                          ClearGpus(BookPath(ctx), devices, DisplayName(CurrentCaller().user),
                                    ctx.clock.Now()));
  std::vector<int> not_drained;
  for (const auto& [key, index] : devices) {
    if (std::find(done.begin(), done.end(), index) == done.end()) not_drained.push_back(index);
  }
  SendJson(res, 200, {{"cleared", Indices(done)}, {"not_drained", Indices(not_drained)}});
  return Status::Ok();
}

}  // namespace

void RegisterGpusRoutes(httplib::Server& http, ServerContext& ctx) {
  const std::string base = std::string(protocol::kApiPrefix) + "/gpus";
  http.Get(base, Route(ctx, Gpus));
  http.Get(base + "/samples", Route(ctx, GpuSamples));
  http.Post(base + "/([^/]+)/drain", Route(ctx, Drain));
  http.Post(base + "/([^/]+)/clear", Route(ctx, Clear));
}

}  // namespace drover::server
