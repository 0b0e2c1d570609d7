// /api/v1/tokens: personal tokens (docs/lab-server.md, "Tokens"). A user makes, lists and revokes
// their own; an admin any user's. Made only by a caller the kernel or the store's token names
// (the socket, an admin): a personal token or a web session does not make more tokens.
#include "common/clock.h"
#include "server/routes.h"

namespace drover::server {
namespace {

Json Public(const PersonalToken& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"user", t.user},
          {"uid", t.uid},
          {"created_ms", t.created_ms},
          {"revoked_ms", t.revoked_ms},
          {"last_used_ms", t.last_used_ms},
          {"state", t.revoked_ms == 0 ? "active" : "revoked"}};
}

Status Create(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const Caller& caller = CurrentCaller();
  if (caller.via != "socket" && !(caller.admin && caller.via == "token")) {
    return PermissionDenied(
        "tokens are made from a shell on the daemon's machine (drover token create), where the "
        "kernel says who asks; a token or a web session does not make more");
  }
  DROVER_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req));
  if (!body.is_object()) return InvalidArgument("the body must be a JSON object");
  for (const char* key : {"name", "user"}) {
    if (body.contains(key) && !body[key].is_string()) {
      return InvalidArgument(std::string("'") + key + "' must be a string");
    }
  }
  const std::string name = body.value("name", std::string());
  UnixUser who = caller.user;
  if (body.contains("user") && body["user"].is_string() &&
      body["user"].get<std::string>() != DisplayName(caller.user)) {
    if (!caller.admin) {
      return PermissionDenied(DisplayName(caller.user) +
                              " may not make tokens for another user: only the daemon's admins "
                              "may (lab.admin_group)");
    }
    DROVER_ASSIGN_OR_RETURN(who, LookupUserByName(body["user"].get<std::string>()));
  }
  DROVER_ASSIGN_OR_RETURN(auto made, ctx.tokens.Create(who, name, ctx.clock.Now()));
  Json out = Public(made.first);
  out["token"] = made.second;
  SendJson(res, 201, out);
  return Status::Ok();
}

Status ListTokens(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const Caller& caller = CurrentCaller();
  const std::string only = req.has_param("user") ? req.get_param_value("user") : "";
  Json list = Json::array();
  for (const PersonalToken& t : ctx.tokens.List()) {
    if (!caller.admin && t.uid != caller.user.uid) continue;
    if (!only.empty() && t.user != only) continue;
    list.push_back(Public(t));
  }
  SendJson(res, 200, {{"tokens", list}});
  return Status::Ok();
}

Status Revoke(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "token id"));
  const Caller& caller = CurrentCaller();
  for (const PersonalToken& t : ctx.tokens.List()) {
    if (t.id != id) continue;
    if (!caller.admin && t.uid != caller.user.uid) {
      return PermissionDenied(DisplayName(caller.user) + " may not revoke token " +
                              std::to_string(id) + ": it is " + t.user + "'s");
    }
  }
  DROVER_ASSIGN_OR_RETURN(PersonalToken t, ctx.tokens.Revoke(id, ctx.clock.Now()));
  SendJson(res, 200, Public(t));
  return Status::Ok();
}

}  // namespace

void RegisterTokensRoutes(httplib::Server& http, ServerContext& ctx) {
  const std::string base = std::string(protocol::kApiPrefix) + "/tokens";
  http.Post(base, Route(ctx, Create));
  http.Get(base, Route(ctx, ListTokens));
  http.Delete(base + "/([^/]+)", Route(ctx, Revoke));
}

}  // namespace drover::server
