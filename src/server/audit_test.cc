#include "server/audit.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace drover::server {
namespace {

namespace fs = std::filesystem;

TEST(AuditLogTest, AppendsPrivatelyReadsFilteredAndRotates) {
  char tmpl[] = "/tmp/drover-audit-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string path = dir + "/audit.log";
  AuditLog log(path, /*rotate_bytes=*/2000);
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        AuditEntry e;
        e.t_ms = 1000 * t + i;
        e.user = t % 2 ? "alice" : "bob";
        e.uid = 1000 + t % 2;
        e.via = "socket";
        e.from = "unix pid 1";
        e.method = "POST";
        e.path = "/api/v1/runs/" + std::to_string(i) + "/cancel";
        e.status = t % 2 ? 200 : 403;
        log.Append(e);
      }
    });
  }
  for (auto& w : writers) w.join();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(fs::exists(path + ".1"));  // rotated at 2000 bytes
  EXPECT_LE(fs::file_size(path), 2000u + 200u);
  AuditQuery q;
  q.limit = 0;
  auto all = log.Read(q);
  ASSERT_TRUE(all.ok());
  EXPECT_GT(all->size(), 5u);
  for (const Json& e : *all) EXPECT_TRUE(e.contains("user") && e.contains("status"));
  q.user = "alice";
  auto alice = log.Read(q);
  ASSERT_TRUE(alice.ok());
  for (const Json& e : *alice) EXPECT_EQ(e["user"], "alice");
  // A line that is not the log's own shape is skipped, not thrown on.
  { std::ofstream(path, std::ios::app) << "{\"user\": 7, \"t_ms\": \"x\"}\n[1,2]\n"; }
  q.since_ms = 1;
  EXPECT_TRUE(log.Read(q).ok());
  q.since_ms = 0;
  q.user.clear();
  q.limit = 3;
  EXPECT_EQ(log.Read(q)->size(), 3u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace drover::server

namespace drover::server {
namespace {

TEST(AuditLogTest, AFloodOfRefusalsIsSummarisedNotLogged) {
  AuditLog log("");
  int64_t suppressed = 0;
  int logged = 0;
  for (int i = 0; i < 1000; ++i) logged += log.AdmitRefusal("eve", 1000 + i, &suppressed) ? 1 : 0;
  EXPECT_EQ(logged, 30);
  EXPECT_TRUE(log.AdmitRefusal("alice", 2000, &suppressed));  // others are not held back
  // The next minute: admitted again, with the count of what was left out.
  EXPECT_TRUE(log.AdmitRefusal("eve", 1000 + 60'000, &suppressed));
  EXPECT_EQ(suppressed, 970);
}

}  // namespace
}  // namespace drover::server

namespace drover::server {
namespace {

AuditEntry Request(Millis t, const std::string& user, const std::string& method,
                   const std::string& path, int status) {
  AuditEntry e;
  e.t_ms = t;
  e.user = user;
  e.uid = user == "alice" ? 1001 : 1002;
  e.via = "socket";
  e.from = "unix pid 7";
  e.method = method;
  e.path = path;
  e.status = status;
  return e;
}

TEST(AuditLogTest, OneUsersFloodOfLongRequestsErasesNoRecordAndStaysBounded) {
  // Issue 39: 61,500 tells with an 8,000-byte query string in 30 s pushed both files past the
  // user's earlier refused requests (each was a 2 KiB line; the log kept 2 x 64 MiB).
  char tmpl[] = "/tmp/drover-audit-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string path = dir + "/audit.log";
  const std::string tell = "/api/v1/experiments/mine/tell?pad=" + std::string(8000, 'a');
  {
    AuditLog log(path, /*rotate_bytes=*/64 * 1024);
    AuditEntry refused = Request(1000, "alice", "POST", "/api/v1/runs/7/cancel", 403);
    refused.error = "alice may not cancel run 7: it is bob's";
    log.Record(refused, "alice");
    log.Record(Request(1001, "bob", "POST", "/api/v1/experiments", 201), "bob");
    for (int i = 0; i < 61'500; ++i) {
      log.Record(Request(2000 + i * 30'000 / 61'500, "alice", "POST", tell, 404), "alice");
    }
    // The next minute: her tells are summarised, and she may be logged again.
    log.Record(Request(62'000, "alice", "POST", "/api/v1/experiments/3/cancel", 200), "alice");
    AuditQuery q;
    q.limit = 0;
    auto all = log.Read(q);
    ASSERT_TRUE(all.ok());
    bool refusal = false, submit = false, summary = false;
    int tells = 0;
    for (const Json& e : *all) {
      const std::string p = e.value("path", "");
      if (e["status"] == 403 && p == "/api/v1/runs/7/cancel") refusal = true;
      if (e["user"] == "bob" && e["status"] == 201) submit = true;
      if (p.find("/tell?pad=") != std::string::npos) {
        ++tells;
        // Cut, with the length it had.
        EXPECT_EQ(p, tell.substr(0, AuditLog::kMaxFieldBytes) + "... (8034 bytes)");
      }
      if (e.contains("not_logged")) {
        summary = true;
        EXPECT_EQ(e["not_logged"], 61'500 - AuditLog::kPerMinute);
        EXPECT_EQ(e["routes"]["POST /api/v1/experiments/mine/tell"], 61'500 - AuditLog::kPerMinute);
        EXPECT_EQ(e["user"], "alice");
      }
    }
    EXPECT_TRUE(refusal) << "her earlier refusal was pushed out";
    EXPECT_TRUE(submit) << "bob's submit was pushed out";
    EXPECT_TRUE(summary);
    EXPECT_EQ(tells, AuditLog::kPerMinute);
    // Nothing rotated: 61,500 requests made 60 lines and a summary.
    EXPECT_FALSE(fs::exists(path + ".1"));
    EXPECT_LT(fs::file_size(path), 64u * 1024);
    // The newest first across both files, by time.
    q.limit = 2;
    auto newest = log.Read(q);
    ASSERT_TRUE(newest.ok());
    ASSERT_EQ(newest->size(), 2u);
    EXPECT_EQ((*newest)[1]["path"], "/api/v1/experiments/3/cancel");
  }
  fs::remove_all(dir);
}

TEST(AuditLogTest, RefusalsAreKeptApartAndOldFilesAreKeptByCount) {
  char tmpl[] = "/tmp/drover-audit-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string path = dir + "/audit.log";
  {
    AuditLog log(path, /*rotate_bytes=*/4000);
    log.Record(Request(1, "alice", "GET", "/api/v1/audit", 403), "alice");
    // Many users' ordinary requests, each within their own minute's share: the log rotates
    // through its kept files; the refusal is in its own file and stays.
    for (int i = 0; i < 2000; ++i) {
      log.Record(Request(10 + i, "u" + std::to_string(i % 100), "POST", "/api/v1/experiments",
                         201),
                 "u" + std::to_string(i % 100));
    }
    EXPECT_EQ(log.refused_path(), dir + "/audit-refused.log");
    for (int i = 1; i <= AuditLog::kKeptFiles; ++i) {
      EXPECT_TRUE(fs::exists(path + "." + std::to_string(i))) << i;
    }
    EXPECT_FALSE(fs::exists(path + "." + std::to_string(AuditLog::kKeptFiles + 1)));
    AuditQuery q;
    q.user = "alice";
    auto alice = log.Read(q);
    ASSERT_TRUE(alice.ok());
    ASSERT_EQ(alice->size(), 1u);
    EXPECT_EQ((*alice)[0]["status"], 403);
    struct stat st {};
    ASSERT_EQ(::stat(log.refused_path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace drover::server

namespace drover::server {
namespace {

TEST(AuditLogTest, RefusalsFromManyAddressesShareOneBudgetAndPushOutNoUsersRefusal) {
  // The red team's flood: bogus-token requests from ~4,000 loopback addresses (any of
  // 127.0.0.0/8), each address with its own 30 refusals a minute, wrote 64 MiB and rotated
  // audit-refused.log twice in ~65 s, pushing out a user's own earlier 403s. Now every caller
  // nobody recognised shares one budget, in a file of its own.
  char tmpl[] = "/tmp/drover-audit-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string path = dir + "/audit.log";
  AuditLog log(path, /*rotate_bytes=*/64 * 1024);
  AuditEntry mine;
  mine.t_ms = 1'000;
  mine.user = "alice";
  mine.uid = 1001;
  mine.via = "socket";
  mine.from = "unix pid 7";
  mine.method = "GET";
  mine.path = "/api/v1/audit";
  mine.status = 403;
  log.Record(mine, "alice");
  int64_t t = 2'000;
  for (int a = 0; a < 4'000; ++a) {
    const std::string addr = "127." + std::to_string(a / 65536 % 256) + "." +
                             std::to_string(a / 256 % 256) + "." + std::to_string(a % 256 + 1);
    for (int i = 0; i < 31; ++i) {
      AuditEntry e;
      e.t_ms = t++ / 20;  // ~124,000 refusals in ~6,200 ms of log time
      e.from = addr + ":4000" + std::to_string(i % 10);
      e.method = "POST";
      e.path = "/api/v1/experiments";
      e.status = 401;
      e.error = "missing or wrong token";
      log.Record(std::move(e), "ip " + addr);
    }
  }
  // Alice's refusal is still there, in the file no unidentified caller writes to.
  AuditQuery q;
  q.user = "alice";
  q.limit = 0;
  auto alice = log.Read(q);
  ASSERT_TRUE(alice.ok());
  ASSERT_EQ(alice->size(), 1u) << "the flood pushed out Alice's earlier refusal";
  EXPECT_EQ((*alice)[0]["status"], 403);
  EXPECT_FALSE(fs::exists(log.refused_path() + ".1")) << "the flood rotated the refusals' file";
  // The flood's lines: one minute's budget of 30 (then counted), whatever the addresses.
  int64_t flood_lines = 0;
  for (const std::string& f : {log.refused_path(), log.refused_path() + ".1",
                               log.unidentified_path(), log.unidentified_path() + ".1"}) {
    std::ifstream in(f);
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"status\":401") != std::string::npos) ++flood_lines;
    }
  }
  EXPECT_LE(flood_lines, AuditLog::kRefusalsPerMinute);
  EXPECT_LT(fs::file_size(log.unidentified_path()), 32u * 1024);
  // The next minute's first line says how many were left out.
  AuditEntry later;
  later.t_ms = 200'000;
  later.from = "127.9.9.9:1";
  later.method = "GET";
  later.path = "/api/v1/gpus";
  later.status = 401;
  log.Record(later, "ip 127.9.9.9");
  q.user.clear();
  q.limit = 1;
  auto last = log.Read(q);
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].value("refusals_not_logged_before", int64_t{0}),
            4'000 * 31 - AuditLog::kRefusalsPerMinute);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace drover::server
