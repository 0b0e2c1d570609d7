// Fairness per user on a root shared daemon (issue 39, items 4 and 5): one user flooding the
// socket with connections whose bodies trickle must not keep another user's requests (or the
// admin's over HTTP) waiting, and one user's flood of long requests must not push the others'
// (or their own earlier refused) records out of the audit log.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "testutil/cli_fixture.h"
#include "testutil/shared_daemon.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::kAdmin;
using testing::kAlice;
using testing::kBob;
using testing::ReadFile;
using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

class FairnessTest : public testing::SharedDaemonFixture {
 protected:
  // `script` (Python) as `user` from the store folder (the socket is daemon.sock there); its
  // output goes to <dir>/<name>.out. Returns its pid.
  pid_t PythonAs(const std::string& user, const std::string& name, const std::string& script,
                 std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=" + user, "--regid=" + user,
                                     "--init-groups", "/usr/bin/python3", "-c", script};
    argv.insert(argv.end(), args.begin(), args.end());
    return Spawn(argv, (dir_ / (name + ".out")).string(), (dir_ / (name + ".err")).string(),
                 store_);
  }
  bool WaitForLine(const std::string& name, const std::string& line, int ms) {
    for (int i = 0; i < ms / 50; ++i) {
      if (ReadFile((dir_ / (name + ".out")).string()).find(line) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
};

TEST_F(FairnessTest, OneUsersTricklingBodiesDoNotFreezeTheOthers) {
  // As the red team did: 300 connections sending a POST's headers (Content-Length: 100000),
  // then a byte a second, reopened when closed; some send 40 KiB at once before trickling.
  const std::string flood =
      "import socket,sys,time\n"
      "head=b'POST /api/v1/experiments/mine/tell HTTP/1.1\\r\\nHost: x\\r\\n"
      "Content-Type: application/json\\r\\nContent-Length: 100000\\r\\n\\r\\n'\n"
      "def open_one(i):\n"
      "  s=socket.socket(socket.AF_UNIX); s.connect('daemon.sock'); s.setblocking(False)\n"
      "  try: s.send(head+(b' '*(40*1024) if i%6==0 else b'{'))\n"
      "  except OSError: pass\n"
      "  return s\n"
      "socks=[open_one(i) for i in range(300)]\n"
      "print('flooding',flush=True)\n"
      "end=time.time()+float(sys.argv[1])\n"
      "while time.time()<end:\n"
      "  for i in range(len(socks)):\n"
      "    try:\n"
      "      if socks[i].send(b' ')<=0: raise OSError()\n"
      "    except BlockingIOError: pass\n"
      "    except OSError:\n"
      "      socks[i].close(); socks[i]=open_one(i)\n"
      "  time.sleep(1)\n";
  const pid_t eve = PythonAs(kAlice, "flood", flood, {"20"});
  ASSERT_TRUE(WaitForLine("flood", "flooding", 10'000)) << ReadFile((dir_ / "flood.err").string());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Bob's requests over the socket, and the admin's over HTTP with the store's token.
  int64_t worst = 0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    auto ls = As(kBob, {"ls"});
    worst = std::max(worst, MsSince(t0));
    EXPECT_EQ(ls.exit_code, 0) << ls.err;
  }
  const auto info = nlohmann::json::parse(ReadFile(store_ + "/daemon.json"));
  httplib::Client admin("127.0.0.1", info["port"].get<int>());
  std::string token = ReadFile(store_ + "/token");
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  admin.set_default_headers({{"Authorization", "Bearer " + token}});
  admin.set_read_timeout(30, 0);
  int64_t admin_worst = 0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    auto r = admin.Get("/api/v1/gpus");
    admin_worst = std::max(admin_worst, MsSince(t0));
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
  }
  ::kill(eve, SIGKILL);
  testing::WaitExit(eve);
  // Before: 5-43 s for Bob, 28 s for the admin (each body held a worker for up to 10 s).
  EXPECT_LT(worst, 2000) << "Bob waited behind Alice's trickling bodies";
  EXPECT_LT(admin_worst, 2000) << "the admin waited behind Alice's trickling bodies";
}

TEST_F(FairnessTest, OneUsersFloodOfLongRequestsErasesNoAuditRecord) {
  // Alice is refused something (logged), Bob submits; then Alice sends tells with an 8,000-byte
  // query string as fast as the daemon answers them.
  EXPECT_NE(RawGetAs(kAlice, "/api/v1/audit").find("403"), std::string::npos);
  auto b = As(kBob, {"submit", "long.yaml"}, Home(kBob));
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string tells =
      "import http.client,socket,sys\n"
      "class C(http.client.HTTPConnection):\n"
      "  def connect(self):\n"
      "    self.sock=socket.socket(socket.AF_UNIX); self.sock.connect('daemon.sock')\n"
      "c=C('x'); path='/api/v1/experiments/mine/tell?pad='+'a'*8000; n=0\n"
      "for i in range(int(sys.argv[1])):\n"
      "  try:\n"
      "    c.request('POST',path,body='{}',headers={'Content-Type':'application/json'})\n"
      "    c.getresponse().read(); n+=1\n"
      "  except (OSError, http.client.HTTPException):\n"
      "    c.close(); c=C('x')\n"
      "print('told',n,flush=True)\n";
  const pid_t flood = PythonAs(kAlice, "tells", tells, {"2000"});
  testing::WaitExit(flood);
  ASSERT_TRUE(WaitForLine("tells", "told", 1000)) << ReadFile((dir_ / "tells.err").string());

  auto audit = As(kAdmin, {"audit", "--json", "-n", "0"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  const auto entries = nlohmann::json::parse(audit.out)["entries"];
  bool alices_refusal = false, bobs_submit = false;
  int alices_tells = 0;
  for (const auto& e : entries) {
    const std::string user = e.value("user", "");
    const std::string path = e.value("path", "");
    if (user == kAlice && e.value("status", 0) == 403 && path == "/api/v1/audit") {
      alices_refusal = true;
    }
    if (user == kBob && e.value("method", "") == "POST" && path == "/api/v1/experiments") {
      bobs_submit = true;
    }
    if (user == kAlice && path.find("/tell?pad=") != std::string::npos) {
      ++alices_tells;
      EXPECT_LT(path.size(), 600u) << "the query string is cut";
      EXPECT_NE(path.find("bytes)"), std::string::npos) << path.substr(0, 100);
    }
  }
  EXPECT_TRUE(alices_refusal) << "Alice's refused request was pushed out";
  EXPECT_TRUE(bobs_submit) << "Bob's submit was pushed out";
  // Her 2,000 tells of a minute: 60 logged one by one, the rest counted for one summary line.
  EXPECT_GE(alices_tells, 1);
  EXPECT_LE(alices_tells, 60);
  // Before: each tell was a 2 KiB line (4 MB for these; 64 MiB pushed the earlier records out).
  EXPECT_LT(fs::file_size(store_ + "/audit.log"), 128u * 1024);
  std::ifstream in(store_ + "/audit.log");
  for (std::string line; std::getline(in, line);) EXPECT_LT(line.size(), 2048u);
}

}  // namespace
}  // namespace drover
