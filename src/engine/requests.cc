#include "engine/requests.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/files.h"
#include "model/spec.h"

namespace drover {
namespace fs = std::filesystem;

namespace {

std::string Dir(const std::string& store_dir) { return store_dir + "/requests"; }


std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

Result<EngineRequest> Parse(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  if (!j.is_object()) return InvalidArgument("the request is not a JSON object");
  EngineRequest r;
  if (j.contains("cancel_runs")) {
    if (!j["cancel_runs"].is_array() || j["cancel_runs"].size() > 10'000) {
      return InvalidArgument("cancel_runs must be a list of run ids");
    }
    for (const Json& id : j["cancel_runs"]) {
      if (!id.is_number_integer()) return InvalidArgument("cancel_runs must be a list of run ids");
      r.cancel_runs.push_back(id.get<int64_t>());
    }
  }
  if (j.contains("cancel_experiment")) {
    if (!j["cancel_experiment"].is_number_integer()) {
      return InvalidArgument("cancel_experiment must be an experiment id");
    }
    r.cancel_experiment = j["cancel_experiment"].get<int64_t>();
  }
  return r;
}

}  // namespace

Result<std::string> PostEngineRequest(const std::string& store_dir, const EngineRequest& request,
                                      Millis now) {
  std::error_code ec;
  fs::create_directories(Dir(store_dir), ec);
  if (ec) return IoStatus("cannot create " + Dir(store_dir), ec);
  static std::atomic<int> posted{0};
  const std::string name = fmt::format("{}-{}-{}.json", now, ::getpid(), posted++);
  Json j = {{"cancel_runs", request.cancel_runs}};
  if (request.cancel_experiment > 0) j["cancel_experiment"] = request.cancel_experiment;
  // Not synced: a request is for an engine running now, and a crash loses it with the engine.
  if (Status st = WriteFileAtomically(Dir(store_dir) + "/" + name, j.dump() + "\n", {.sync = false});
      !st.ok()) {
    return st.WithContext("writing a request into " + Dir(store_dir));
  }
  return name;
}

std::vector<std::pair<std::string, EngineRequest>> TakeEngineRequests(const std::string& store_dir) {
  std::vector<std::pair<std::string, EngineRequest>> out;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(Dir(store_dir), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 5 && name.ends_with(".json")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  if (names.size() > kMaxRequestsPerLook) names.resize(kMaxRequestsPerLook);
  for (const std::string& name : names) {
    auto parsed = Parse(ReadSmallFile(Dir(store_dir) + "/" + name));
    if (!parsed.ok()) {
      AnswerEngineRequest(store_dir, name, parsed.status());
      continue;
    }
    out.emplace_back(name, std::move(*parsed));
  }
  return out;
}

void AnswerEngineRequest(const std::string& store_dir, const std::string& name, const Status& st) {
  const std::string base = Dir(store_dir) + "/" + name;
  (void)WriteFileAtomically(base + ".done", st.ok() ? "ok\n" : "error: " + st.message() + "\n",
                            {.sync = false});
  std::error_code ec;
  fs::remove(base, ec);
}

Status AwaitEngineAnswer(const std::string& store_dir, const std::string& name, Millis timeout_ms) {
  const std::string base = Dir(store_dir) + "/" + name;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    std::error_code ec;
    if (fs::exists(base + ".done", ec)) {
      std::string answer = ReadSmallFile(base + ".done");
      fs::remove(base + ".done", ec);
      while (!answer.empty() && answer.back() == '\n') answer.pop_back();
      if (answer == "ok") return Status::Ok();
      return FailedPrecondition(answer.rfind("error: ", 0) == 0 ? answer.substr(7) : answer);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::error_code ec;
  fs::remove(base, ec);
  return Unavailable(fmt::format(
      "the drover run in the foreground did not take the request within {} s", timeout_ms / 1000));
}

void ClearEngineRequests(const std::string& store_dir) {
  std::error_code ec;
  fs::remove_all(Dir(store_dir), ec);
}

}  // namespace drover
