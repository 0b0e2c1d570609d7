// /api/v1/runs/{id}/logs: a byte range of an attempt's stdout or stderr, read from the log file
// whose path the store records; follow=1 long-polls until there are new bytes or the attempt ends,
// so `drover logs -f` is a loop of these requests.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "server/routes.h"

namespace drover::server {
namespace {

constexpr int64_t kDefaultLimitBytes = 256 * 1024;
constexpr int64_t kMaxLimitBytes = 4 * 1024 * 1024;
constexpr auto kPollInterval = std::chrono::milliseconds(100);

// The size of a log file; a file the run has not created yet is empty.
Result<int64_t> FileSize(const std::string& path) {
  if (path.empty()) return int64_t{0};
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return int64_t{0};
    return ErrnoStatus("reading log " + path);
  }
  return static_cast<int64_t>(st.st_size);
}

Result<std::string> ReadRange(const std::string& path, int64_t offset, int64_t length) {
  std::string out;
  if (length <= 0) return out;
  // Never through a link: a log is a file drover made.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("reading log " + path);
  out.resize(static_cast<size_t>(length));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd, out.data() + got, out.size() - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status st = ErrnoStatus("reading log " + path);
      ::close(fd);
      return st;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

// Drops a UTF-8 sequence cut in half at the end of the chunk (the next request starts with it),
// unless that would leave nothing.
void TrimPartialUtf8(std::string& data) {
  size_t n = data.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(data[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = c < 0x80           ? 1
                  : (c >> 5) == 0x6  ? 2
                  : (c >> 4) == 0xE  ? 3
                  : (c >> 3) == 0x1E ? 4
                                     : 1;
    if (need > back && n - back > 0) data.resize(n - back);
    return;
  }
}

Status Logs(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  DROVER_ASSIGN_OR_RETURN(int64_t id, ParseId(req.matches[1].str(), "run id"));
  {
    DROVER_ASSIGN_OR_RETURN(Run owned, LoadRun(ctx, id));
    DROVER_RETURN_IF_ERROR(MayActOn(CurrentCaller(), owned, "read the logs of"));
  }
  DROVER_ASSIGN_OR_RETURN(auto attempt_q, QueryInt(req, "attempt", 1, 1'000'000));
  DROVER_ASSIGN_OR_RETURN(auto offset_q, QueryInt(req, "offset", 0, INT64_MAX));
  DROVER_ASSIGN_OR_RETURN(auto limit_q, QueryInt(req, "limit_bytes", 1, kMaxLimitBytes));
  DROVER_ASSIGN_OR_RETURN(bool follow, QueryBool(req, "follow"));
  std::string stream = req.has_param("stream") ? req.get_param_value("stream") : "stdout";
  if (stream != "stdout" && stream != "stderr") {
    return InvalidArgument("query parameter 'stream' must be stdout or stderr, got '" + stream +
                           "'");
  }
  const int64_t offset = offset_q.value_or(0);
  const int64_t limit = limit_q.value_or(kDefaultLimitBytes);

  std::shared_ptr<void> slot;
  if (follow) {
    slot = ctx.AcquireLongPoll();
    if (!slot) {
      return Unavailable("too many log follows and event streams are open (" +
                         std::to_string(ctx.MaxLongPolls()) + "); retry in a moment");
    }
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(ctx.options.follow_timeout_ms);

  while (true) {
    DROVER_ASSIGN_OR_RETURN(Run run, LoadRun(ctx, id));
    DROVER_ASSIGN_OR_RETURN(Store * store, ctx.ThreadStore());
    DROVER_ASSIGN_OR_RETURN(auto attempts, store->ListAttempts(run.id));
    const int count = static_cast<int>(attempts.size());
    const int number = attempt_q ? static_cast<int>(*attempt_q) : count;
    // With follow, the attempt after the last may be asked for: it is waited for (a retry).
    if (number > count + (follow ? 1 : 0)) {
      return NotFound("run " + std::to_string(run.id) + " has " + std::to_string(count) +
                      " attempt" + (count == 1 ? "" : "s") + "; attempt " + std::to_string(number) +
                      " does not exist");
    }
    const bool give_up = !follow || ctx.stopping || std::chrono::steady_clock::now() >= deadline;
    Json reply = {{"run_id", run.id},
                  {"attempt", number},
                  {"attempts", count},
                  {"stream", stream},
                  {"run_state", ToString(run.state)},
                  {"run_ended", IsFinal(run.state)}};

    if (number == 0 || number > count) {
      // No such attempt yet: nothing to read until it starts (or the run ends without it).
      if (IsFinal(run.state) || give_up) {
        reply.update({{"path", ""},
                      {"offset", offset},
                      {"next_offset", offset},
                      {"data", ""},
                      {"ended", IsFinal(run.state)}});
        SendJson(res, 200, reply);
        return Status::Ok();
      }
    } else {
      const Attempt& a = attempts[number - 1];
      const std::string& path = stream == "stdout" ? a.stdout_path : a.stderr_path;
      // `ended` is read before the size: once ended, the file does not grow any more.
      const bool attempt_ended = a.ended;
      DROVER_ASSIGN_OR_RETURN(int64_t size, FileSize(path));
      if (offset > size) {
        return InvalidArgument("offset " + std::to_string(offset) + " is past the end of the " +
                               stream + " log of attempt " + std::to_string(number) + " (" +
                               std::to_string(size) + " bytes)");
      }
      if (size > offset || attempt_ended || give_up) {
        DROVER_ASSIGN_OR_RETURN(std::string data,
                                ReadRange(path, offset, std::min(limit, size - offset)));
        if (!(attempt_ended && offset + static_cast<int64_t>(data.size()) >= size)) {
          TrimPartialUtf8(data);
        }
        int64_t next = offset + static_cast<int64_t>(data.size());
        reply.update({{"path", path},
                      {"offset", offset},
                      {"next_offset", next},
                      {"size", size},
                      {"data", std::move(data)},
                      {"ended", attempt_ended && next >= size}});
        SendJson(res, 200, reply);
        return Status::Ok();
      }
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace

void RegisterLogsRoutes(httplib::Server& http, ServerContext& ctx) {
  http.Get(std::string(protocol::kApiPrefix) + "/runs/([^/]+)/logs", Route(ctx, Logs));
}

}  // namespace drover::server
