// What one user of a lab's shared daemon can learn of another's (their pipeline stages' commands
// and env, the notes of their runs' events, whether a file exists in their private folder), and
// what a run or a request can do to the terminal of whoever looks at it (escape sequences in a
// metric name, a logged hyper-parameter, a failure line, a request path). docs/security.md,
// issue 39 items 6 and 8.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "testutil/shared_daemon.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::kAdmin;
using testing::kAlice;
using testing::kBob;
using testing::ReadFile;
using testing::Sh;
using testing::WaitExit;

class LeaksTest : public testing::SharedDaemonFixture {
 protected:
  // The event stream's history (?after=0) as `user` sees it: what arrives in `seconds`.
  std::string EventsAs(const std::string& user, double seconds = 1.5) {
    static int n = 0;
    const std::string base = (dir_ / ("events-" + std::to_string(n++))).string();
    const std::string script =
        "import socket,sys,time\n"
        "s=socket.socket(socket.AF_UNIX)\ns.connect('daemon.sock')\n"
        "s.sendall(b'GET /api/v1/events?after=0 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "s.settimeout(0.2)\nout=b''\nend=time.time()+float(sys.argv[1])\n"
        "while time.time()<end:\n"
        "  try:\n    b=s.recv(65536)\n    if not b: break\n    out+=b\n"
        "  except socket.timeout: pass\n"
        "sys.stdout.write(out.decode('utf-8','replace'))\n";
    WaitExit(Spawn({"/usr/bin/setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups",
                    "/usr/bin/python3", "-c", script, std::to_string(seconds)},
                   base + ".out", base + ".err", store_));
    return ReadFile(base + ".out") + ReadFile(base + ".err");
  }

  // A request with no body as `user` over the daemon's socket: the status line.
  std::string RequestAs(const std::string& user, const std::string& method,
                        const std::string& target) {
    const std::string reply = RawRequestAs(user, method, target);
    return reply.substr(0, reply.find("\r\n")) + "\n";
  }

  // Writes `name` into `user`'s folder, theirs.
  std::string WriteAs(const char* user, const std::string& name, const std::string& text) {
    const std::string path = Write(std::string(user) + "/" + name, text);
    Sh("chown " + std::string(user) + ": " + path);
    return path;
  }

  // The runs of the store as `user` lists them, once every run is final (or after 30 s).
  nlohmann::json FinalRuns(const char* user) {
    nlohmann::json runs;
    for (int i = 0; i < 300; ++i) {
      auto ls = As(user, {"ls", "--json"});
      runs = nlohmann::json::parse(ls.out, nullptr, false);
      bool done = runs.is_array() && !runs.empty();
      for (const auto& r : runs.is_array() ? runs : nlohmann::json::array()) {
        const std::string s = r.value("state", "");
        done = done && (s == "succeeded" || s == "failed" || s == "cancelled");
      }
      if (done) return runs;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return runs;
  }
};

bool HasEsc(const std::string& s) { return s.find('\x1b') != std::string::npos; }

TEST_F(LeaksTest, AnotherUsersPipelineStagesAreRedactedAsTheTopLevelIs) {
  WriteAs(kAlice, "pipe.yaml",
          "name: pipe\n"
          "stages:\n"
          "  prep:\n"
          "    command: sh -c 'sleep 60' --key=stage-alice-secret\n"
          "    env: {STAGE_KEY: sk-stage-alice}\n"
          "  train:\n"
          "    command: sh -c 'sleep 60' --key=train-alice-secret\n"
          "    needs: [prep]\n");
  auto sub = As(kAlice, {"submit", "pipe.yaml"}, Home(kAlice));
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string exp = std::string(Trim(sub.out));
  auto ls = nlohmann::json::parse(As(kAlice, {"ls", "--json"}).out);
  ASSERT_FALSE(ls.empty());
  const std::string run = std::to_string(ls[0]["id"].get<int64_t>());
  for (const std::string& target : std::vector<std::string>{
           "/api/v1/experiments/" + exp, "/api/v1/experiments?limit=10", "/api/v1/runs/" + run}) {
    const std::string bobs = RawGetAs(kBob, target);
    EXPECT_NE(bobs.find("200 OK"), std::string::npos) << target << ": " << bobs;
    for (const char* secret : {"stage-alice-secret", "train-alice-secret", "sk-stage-alice"}) {
      EXPECT_EQ(bobs.find(secret), std::string::npos) << target << " shows " << secret << ": " << bobs;
    }
  }
  // The stages' names and needs are the lab's to see.
  const std::string bobs = RawGetAs(kBob, "/api/v1/experiments/" + exp);
  EXPECT_NE(bobs.find("\"prep\""), std::string::npos) << bobs;
  const std::string hers = RawGetAs(kAlice, "/api/v1/experiments/" + exp);
  EXPECT_NE(hers.find("stage-alice-secret"), std::string::npos) << hers;
  EXPECT_NE(hers.find("sk-stage-alice"), std::string::npos) << hers;
  As(kAlice, {"cancel", "--experiment", exp});
}

TEST_F(LeaksTest, TheEventStreamShowsAnotherUsersRunsWithoutTheirNotes) {
  WriteAs(kAlice, "fail.yaml",
          "name: fail\ncommand: sh -c 'echo alice-stderr-secret >&2; exit 3'\n");
  auto sub = As(kAlice, {"submit", "fail.yaml"}, Home(kAlice));
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto runs = FinalRuns(kAlice);
  ASSERT_EQ(runs.size(), 1u) << runs.dump();
  ASSERT_EQ(runs[0]["state"], "failed") << runs.dump();
  const std::string hers = EventsAs(kAlice);
  // The note of the failed run quotes its stderr: its submitter sees it...
  EXPECT_NE(hers.find("alice-stderr-secret"), std::string::npos) << hers;
  // ...another user sees the run, its state and the reason code, not the note.
  const std::string bobs = EventsAs(kBob);
  EXPECT_NE(bobs.find("\"state\":\"failed\""), std::string::npos) << bobs;
  EXPECT_EQ(bobs.find("alice-stderr-secret"), std::string::npos) << bobs;
  EXPECT_EQ(bobs.find(Home(kAlice)), std::string::npos) << bobs;
  // An admin, everything.
  EXPECT_NE(EventsAs(kAdmin).find("alice-stderr-secret"), std::string::npos);
}

TEST_F(LeaksTest, ACheckCannotTellAFileInAnotherUsersPrivateFolderFromAMissingOne) {
  fs::create_directories(Home(kBob) + "/private");
  Write(std::string(kBob) + "/private/data.bin", "bob's\n");
  Sh("chown -R " + std::string(kBob) + ": " + Home(kBob) + "/private && chmod 700 " + Home(kBob) +
     "/private");
  const std::string there = Home(kBob) + "/private/data.bin";
  const std::string missing = Home(kBob) + "/private/nothing.bin";
  auto answer = [&](const std::string& path,
                    const std::vector<std::string>& how) {
    WriteAs(kAlice, "probe.yaml",
            "name: probe\ncommand: sh -c 'ls $DROVER_DATA_D'\ndata: {d: " + path + "}\n");
    std::vector<std::string> args = how;
    args.push_back("probe.yaml");
    auto r = As(kAlice, args, Home(kAlice));
    std::string text = std::to_string(r.exit_code) + " " + r.out + r.err;
    // The same answer but for the name asked about.
    for (size_t at; (at = text.find(path)) != std::string::npos;) text.replace(at, path.size(), "P");
    for (const std::string& name : {std::string("data.bin"), std::string("nothing.bin")}) {
      for (size_t at; (at = text.find(name)) != std::string::npos;) text.replace(at, name.size(), "F");
    }
    return text;
  };
  for (const auto& how : {std::vector<std::string>{"run", "--dry-run"},
                          std::vector<std::string>{"submit"}}) {
    const std::string a = answer(there, how);
    const std::string b = answer(missing, how);
    EXPECT_EQ(a, b) << how[0];
    EXPECT_NE(a.rfind("0 ", 0), 0u) << how[0] << ": " << a;  // refused, both
  }
  // A stage's inputs the same way.
  auto inputs = [&](const std::string& path) {
    WriteAs(kAlice, "in.yaml",
            "name: in\nstages:\n  s:\n    command: 'true'\n    inputs: [" + path + "]\n");
    auto r = As(kAlice, {"submit", "in.yaml"}, Home(kAlice));
    std::string text = std::to_string(r.exit_code) + " " + r.err;
    for (size_t at; (at = text.find(path)) != std::string::npos;) text.replace(at, path.size(), "P");
    return text;
  };
  EXPECT_EQ(inputs(there), inputs(missing));
  // Bob himself may.
  Write(std::string(kBob) + "/mine.yaml",
        "name: mine\ncommand: sh -c 'ls $DROVER_DATA_D'\ndata: {d: " + there + "}\n");
  Sh("chown " + std::string(kBob) + ": " + Home(kBob) + "/mine.yaml");
  auto his = As(kBob, {"run", "--dry-run", "mine.yaml"}, Home(kBob));
  EXPECT_EQ(his.exit_code, 0) << his.err;
}

TEST_F(LeaksTest, EscapeSequencesFromRunsAndRequestsNeverReachATerminal) {
  // A run whose metric names, logged hyper-parameters and last stderr line hold escapes: clear
  // the screen, set the title, write the clipboard (OSC 52); a CSI sent as the C1 byte too.
  WriteAs(kAlice, "emit.py",
          "import json,sys\n"
          "print(json.dumps({'drover_hparams': {'opt\\x1b]0;pwned\\x07': 'adam\\x1b[2J'}}))\n"
          "print(json.dumps({'step': 1, 'loss\\x1b]52;c;SGVsbG8=\\x07': 0.5, 'acc\\x1b[2J': 0.9,"
          " 'csi\\x9b2J': 1}))\n"
          "sys.stdout.flush()\n"
          "sys.stderr.write('Traceback \\x1b]52;c;SGVsbG8=\\x07 boom\\x1b[2J\\r\\n')\n"
          "sys.exit(3)\n");
  WriteAs(kAlice, "esc.yaml", "name: esc\ncommand: /usr/bin/python3 emit.py\n");
  auto sub = As(kAlice, {"submit", "esc.yaml"}, Home(kAlice));
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string exp = std::string(Trim(sub.out));
  auto runs = FinalRuns(kAlice);
  ASSERT_EQ(runs.size(), 1u) << runs.dump();
  ASSERT_EQ(runs[0]["state"], "failed") << runs.dump();
  const std::string run = std::to_string(runs[0]["id"].get<int64_t>());
  // A request path with an escape: it reaches the audit log's request and error columns.
  const std::string status =
      RequestAs(kBob, "DELETE", "/api/v1/experiments/%1b%5d52%3bc%3bSGVsbG8%3d%07x%1b%5b2J");
  EXPECT_NE(status.find("404"), std::string::npos) << status;
  for (const auto& [who, args] :
       std::vector<std::pair<const char*, std::vector<std::string>>>{
           {kAlice, {"ls"}},
           {kAlice, {"show", run}},
           {kAlice, {"compare", exp}},
           {kAlice, {"alerts"}},
           {kBob, {"show", run}},
           {kAdmin, {"audit"}}}) {
    auto r = As(who, args);
    const std::string all = r.out + r.err;
    EXPECT_FALSE(HasEsc(all)) << args[0] << ": " << all;
    SCOPED_TRACE(args[0] + " as " + who + ": " + all);
    EXPECT_EQ(all.find("\xc2\x9b"), std::string::npos) << args[0] << ": " << all;
    EXPECT_EQ(all.find('\r'), std::string::npos) << args[0] << ": " << all;
    if (args[0] != "alerts") {
      // Shown, visibly: what was there is readable.
      EXPECT_NE(all.find("\\x1b"), std::string::npos) << args[0] << ": " << all;
    }
  }
}

}  // namespace
}  // namespace drover
