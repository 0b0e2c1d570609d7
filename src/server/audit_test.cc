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
