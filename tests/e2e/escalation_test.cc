// The red team's root escalations on a root shared daemon (issue 39, docs/security.md "Classes
// closed"), each as it was found and as a new variant: nothing privileged acts by path in a tree
// a user controls, and every run executes as a person who asked for it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>
#include <nlohmann/json.hpp>
#include <string>

#include "common/users.h"
#include "testutil/shared_daemon.h"

namespace drover {
namespace {

namespace fs = std::filesystem;
using testing::kAdmin;
using testing::kAlice;
using testing::kBob;
using testing::ReadFile;
using testing::Sh;

class EscalationTest : public testing::SharedDaemonFixture {
 protected:
  // A root-only folder with one file, as /etc or /root would be.
  std::string Sentinel(const std::string& name, const std::string& text) {
    const fs::path dir = dir_ / name;
    fs::create_directories(dir);
    std::ofstream(dir / "passwd") << text;
    fs::permissions(dir, fs::perms::owner_all);
    fs::permissions(dir / "passwd", fs::perms::owner_read | fs::perms::owner_write);
    return dir.string();
  }

  // A project of `user`'s under their home, with `files` (path -> text), theirs.
  std::string Project(const char* user, const std::string& name,
                      const std::vector<std::pair<std::string, std::string>>& files) {
    const std::string home = Home(user) + "/" + name;
    for (const auto& [path, text] : files) {
      fs::create_directories(fs::path(home + "/" + path).parent_path());
      std::ofstream(home + "/" + path) << text;
    }
    Sh("chown -R " + std::string(user) + ": " + home);
    return home;
  }

  // The last run of `user`'s experiment `name`, as `drover ls --json` shows it.
  nlohmann::json LastRun(const char* user) {
    auto ls = As(user, {"ls", "--mine", "--json"});
    auto runs = nlohmann::json::parse(ls.out.empty() ? "[]" : ls.out);
    nlohmann::json last;
    for (const auto& r : runs) {
      if (last.is_null() || r["id"].get<int64_t>() > last["id"].get<int64_t>()) last = r;
    }
    return last;
  }
};

TEST_F(EscalationTest, AnOutputTheRunTurnedIntoALinkNeverWritesThroughIt) {
  // The probe as found: `a/passwd` in the project, the stage replaces `a` with a link to a
  // root-only folder and declares `a` its output. Storing walked the snapshot's a/passwd under
  // the link and linked the user's text over the folder's file, as root.
  const std::string victim = Sentinel("victim", "root's own line\n");
  const std::string home = Project(
      kAlice, "swap",
      {{"a/passwd", "alice was here\n"},
       {"swap.yaml", "name: swap\nstages:\n  make: {command: \"sh -c 'rm -rf a && ln -s " +
                         victim + " a'\", outputs: [a]}\n"}});
  auto r = As(kAlice, {"run", "swap.yaml"}, home);
  EXPECT_EQ(ReadFile(victim + "/passwd"), "root's own line\n") << r.out << r.err;
  struct stat st {};
  ASSERT_EQ(::stat((victim + "/passwd").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The output is what the run left: a link, kept as a link (its text), nothing below it.
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto run = LastRun(kAlice);
  const std::string out = store_ + "/outputs/" + std::to_string(run["id"].get<int64_t>());
  std::error_code ec;
  EXPECT_TRUE(fs::is_symlink(out + "/a", ec)) << out;
  EXPECT_EQ(fs::read_symlink(out + "/a", ec).string(), victim);
  auto arts = As(kAlice, {"artifacts", std::to_string(run["id"].get<int64_t>()), "--json"});
  EXPECT_EQ(arts.out.find("passwd"), std::string::npos) << arts.out;
}

TEST_F(EscalationTest, AnOutputBeneathALinkIsRefusedWithoutNamingWhatIsBehindIt) {
  // A variant: the link is made above a declared output (`d -> a root-only folder`,
  // `outputs: [d/sub]`); the walk followed it and named the folder's first file in the note.
  const std::string victim = Sentinel("hidden", "x\n");
  std::ofstream(victim + "/first-secret-name") << "y";
  const std::string home = Project(
      kAlice, "under",
      {{"under.yaml", "name: under\nstages:\n  make: {command: \"ln -s " + victim +
                          " d\", outputs: [d/sub]}\n"}});
  auto r = As(kAlice, {"run", "under.yaml"}, home);
  EXPECT_NE(r.exit_code, 0);
  const auto run = LastRun(kAlice);
  auto show = As(kAlice, {"show", std::to_string(run["id"].get<int64_t>())});
  EXPECT_NE(show.out.find("missing_output"), std::string::npos) << show.out << show.err;
  for (const std::string& text : {r.out, r.err, show.out, show.err}) {
    EXPECT_EQ(text.find("first-secret-name"), std::string::npos) << text;
    EXPECT_EQ(text.find("passwd"), std::string::npos) << text;
  }
}

TEST_F(EscalationTest, ADownloadedArtifactIsTheStoredObjectCheckedAgainstItsHash) {
  // The download route served the path under outputs/ (through a stored link, unhashed). Now
  // it serves the content object by hash, and refuses one whose bytes changed.
  const std::string home = Project(
      kAlice, "art",
      {{"art.yaml", "name: art\nstages:\n  make: {command: \"sh -c 'echo model > m.bin'\", "
                    "outputs: [m.bin]}\n"}});
  ASSERT_EQ(As(kAlice, {"run", "art.yaml"}, home).exit_code, 0);
  const int64_t id = LastRun(kAlice)["id"].get<int64_t>();
  const std::string target =
      "/api/v1/runs/" + std::to_string(id) + "/artifacts/file?path=m.bin";
  std::string reply = RawRequestAs(kAlice, "GET", target);
  EXPECT_NE(reply.find("200 OK"), std::string::npos) << reply;
  EXPECT_NE(reply.find("\r\n\r\nmodel\n"), std::string::npos) << reply;
  // Root changes the object behind the daemon's back: it is not served.
  auto arts = nlohmann::json::parse(As(kAlice, {"artifacts", std::to_string(id), "--json"}).out);
  const std::string hash = arts["files"][0]["sha256"].get<std::string>();
  const std::string object = store_ + "/artifacts/" + hash.substr(0, 2) + "/" + hash;
  fs::permissions(object, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(object, std::ios::trunc) << "mode1\n";  // the same size
  reply = RawRequestAs(kAlice, "GET", target);
  EXPECT_EQ(reply.find("mode1"), std::string::npos) << reply;
  EXPECT_NE(reply.find("no longer matches its recorded sha256"), std::string::npos) << reply;
}

TEST_F(EscalationTest, ARecipeSwappedForALinkNeverShowsWhatTheUserCouldNotRead) {
  // The probe as found: `GET /recipes/show?path=` checked the owner with stat, then read the
  // path again as root, and its error quoted the first line; a link flipped between the two
  // handed out the daemon's token within 32-157 requests. Bob flips a link of his between his
  // own recipe and a root-only file while asking 400 times.
  const std::string victim = Sentinel("shadowish", "TOPSECRET-first-line\n");
  Project(kBob, "flip", {{"mine.yaml", "just words\n"}});
  const std::string flip = Home(kBob) + "/flip";
  const std::string script =
      "import os,socket,sys,threading\n"
      "flip=sys.argv[1]; victim=sys.argv[2]\n"
      "stop=False\n"
      "def flipper():\n"
      "  i=0\n"
      "  while not stop:\n"
      "    tmp=flip+'/tmp%d'%(i%2); i+=1\n"
      "    try: os.unlink(tmp)\n"
      "    except OSError: pass\n"
      "    os.symlink(victim if i%2 else flip+'/mine.yaml', tmp)\n"
      "    os.rename(tmp, flip+'/link.yaml')\n"
      "t=threading.Thread(target=flipper); t.start()\n"
      "leaks=0; answers=set()\n"
      "for _ in range(400):\n"
      "  s=socket.socket(socket.AF_UNIX); s.connect('daemon.sock')\n"
      "  s.sendall(('GET /api/v1/recipes/show?path='+flip+'/link.yaml HTTP/1.1\\r\\nHost: "
      "x\\r\\nConnection: close\\r\\n\\r\\n').encode())\n"
      "  out=b''\n"
      "  while True:\n"
      "    x=s.recv(65536)\n"
      "    if not x: break\n"
      "    out+=x\n"
      "  s.close()\n"
      "  if b'TOPSECRET' in out: leaks+=1\n"
      "  answers.add(out.split(b'\\r\\n',1)[0])\n"
      "stop=True; t.join()\n"
      "print('leaks', leaks, sorted(a.decode() for a in answers))\n";
  const std::string base = (dir_ / "flip").string();
  testing::WaitExit(Spawn({"/usr/bin/setpriv", "--reuid=" + std::string(kBob),
                           "--regid=" + std::string(kBob), "--init-groups", "/usr/bin/python3",
                           "-c", script, flip, victim + "/passwd"},
                          base + ".out", base + ".err", store_));
  const std::string out = ReadFile(base + ".out");
  EXPECT_NE(out.find("leaks 0 "), std::string::npos) << out << ReadFile(base + ".err");
  // The token itself, by name: refused like any file that is not the caller's, content unsaid.
  const std::string token = RawRequestAs(kBob, "GET", "/api/v1/recipes/show?path=" + store_ + "/token");
  EXPECT_NE(token.find("403"), std::string::npos) << token;
  EXPECT_EQ(token.find(ReadFile(store_ + "/token").substr(0, 16)), std::string::npos);
  // A file Bob owns but may not read (mode 000): read with his rights, so refused too.
  Project(kBob, "closed", {{"drover.yaml", "SECRET-OF-BOB-ONLY-BY-MODE\n"}});
  fs::permissions(Home(kBob) + "/closed/drover.yaml", fs::perms::none);
  const std::string closed =
      RawRequestAs(kBob, "GET", "/api/v1/recipes/show?path=" + Home(kBob) + "/closed/drover.yaml");
  EXPECT_EQ(closed.find("SECRET-OF-BOB"), std::string::npos) << closed;
  EXPECT_NE(closed.find("403"), std::string::npos) << closed;
  // His own readable recipe still works.
  Project(kBob, "ok", {{"drover.yaml", "command: python3 train.py\nparams: {lr: 0.1}\n"}});
  const std::string ok = RawRequestAs(kBob, "GET", "/api/v1/recipes/show?path=" + Home(kBob) + "/ok");
  EXPECT_NE(ok.find("200 OK"), std::string::npos) << ok;
}

TEST_F(EscalationTest, AnAdminsReproductionRunsAsTheSubmitterAndRefusesEditedCode) {
  // The probe as found: `drover reproduce` by an admin made the admin the new experiment's
  // submitter, so root ran the user's snapshot (theirs, editable after the run).
  const std::string ran_as = (dir_ / "out" / "whoami.txt").string();
  const std::string home = Project(
      kAlice, "repro",
      {{"repro.yaml", "name: repro\ncommand: sh -c \"id -un >> " + ran_as + "\"\n"}});
  ASSERT_EQ(As(kAlice, {"run", "repro.yaml"}, home).exit_code, 0);
  const int64_t id = LastRun(kAlice)["id"].get<int64_t>();
  EXPECT_EQ(ReadFile(ran_as), std::string(kAlice) + "\n");
  // Root (an admin on the socket) and the admin group's member over the API.
  auto root = testing::RunDrover({"--store", store_, "reproduce", std::to_string(id)});
  EXPECT_EQ(root.exit_code, 0) << root.out << root.err;
  const std::string reply =
      RawRequestAs(kAdmin, "POST", "/api/v1/runs/" + std::to_string(id) + "/reproduce", "{}");
  EXPECT_NE(reply.find("200 OK"), std::string::npos) << reply;
  for (int i = 0; i < 200 && ReadFile(ran_as).size() < 3 * (std::string(kAlice).size() + 1);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ReadFile(ran_as), std::string(kAlice) + "\n" + kAlice + "\n" + kAlice + "\n");
  // Every reproduction is Alice's experiment, counted against her.
  auto mine = nlohmann::json::parse(As(kAlice, {"ls", "--mine", "--json"}).out);
  EXPECT_EQ(mine.size(), 3u) << mine.dump();
  // Alice edits her recorded snapshot after the run: a reproduction is refused, naming the file.
  auto show = nlohmann::json::parse(As(kAlice, {"show", std::to_string(id), "--json"}).out);
  const std::string snap = show["snapshot"]["path"].get<std::string>();
  ASSERT_FALSE(snap.empty()) << show.dump();
  Sh("/usr/bin/setpriv --reuid=" + std::string(kAlice) + " --regid=" + kAlice +
     " --init-groups sh -c 'chmod u+w " + snap + " " + snap + "/repro.yaml; echo \"# edited\" >> " +
     snap + "/repro.yaml'");
  const std::string refused =
      RawRequestAs(kAdmin, "POST", "/api/v1/runs/" + std::to_string(id) + "/reproduce", "{}");
  EXPECT_NE(refused.find("changed since it was recorded"), std::string::npos) << refused;
  EXPECT_NE(refused.find("repro.yaml"), std::string::npos) << refused;
}

TEST_F(EscalationTest, AnEditedSnapshotDoesNotStartAgainAndIsStoredAfreshOnTheNextSubmit) {
  // A submitter's snapshot is theirs (their runs' overlays show its files as theirs), so they can
  // reach it; a retry or a queued run of one they edited ran the edited code. Now its seal is
  // checked before each start on a root daemon.
  const std::string out = (dir_ / "out" / "sealed.txt").string();
  const std::string home =
      Project(kAlice, "sealed",
              {{"sealed.yaml", "name: sealed\ncommand: sh s.sh\n"},
               {"s.sh", "echo original >> " + out + "\nexit 3\n"}});
  auto first = As(kAlice, {"run", "sealed.yaml"}, home);
  ASSERT_EQ(first.exit_code, 1) << first.out << first.err;  // it fails: a retry is in order
  const int64_t id = LastRun(kAlice)["id"].get<int64_t>();
  auto show = nlohmann::json::parse(As(kAlice, {"show", std::to_string(id), "--json"}).out);
  const std::string snap = show["snapshot"]["path"].get<std::string>();
  ASSERT_FALSE(snap.empty()) << show.dump();
  Sh("/usr/bin/setpriv --reuid=" + std::string(kAlice) + " --regid=" + kAlice +
     " --init-groups sh -c 'chmod u+w " + snap + " " + snap + "/s.sh; echo \"echo edited >> " +
     out + "\" > " + snap + "/s.sh'");
  auto retry = As(kAlice, {"retry", std::to_string(id)}, home);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto after = As(kAlice, {"show", std::to_string(id), "--json"});
  EXPECT_NE(after.out.find("changed since it was recorded (s.sh: changed"), std::string::npos)
      << retry.out << retry.err << after.out;
  EXPECT_EQ(ReadFile(out), "original\n");  // the edited code never ran
  // The same tree submitted again: the changed snapshot is replaced, and the original runs.
  auto again = As(kAlice, {"run", "sealed.yaml", "--rerun"}, home);
  EXPECT_EQ(again.exit_code, 1) << again.out << again.err;  // its own exit 3
  EXPECT_NE(again.out.find("failed (exit_code)"), std::string::npos)
      << again.out << As(kAlice, {"show", "2"}).out;
  EXPECT_EQ(ReadFile(out), "original\noriginal\n");
}

TEST_F(EscalationTest, AUserReproducesVerifiesAndExportsTheirOwnRunThroughTheSharedDaemon) {
  // The store is root's alone; reproduce and verify read it through the daemon.
  const std::string home =
      Project(kAlice, "own",
              {{"own.yaml", "name: own\ncommand: sh m.sh\n"}, {"m.sh", "echo '{\"acc\": 0.5}'\n"}});
  ASSERT_EQ(As(kAlice, {"run", "own.yaml"}, home).exit_code, 0);
  const int64_t id = LastRun(kAlice)["id"].get<int64_t>();
  auto verify = As(kAlice, {"verify", std::to_string(id)});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("everything it rests on is as recorded"), std::string::npos)
      << verify.out;
  auto repro = As(kAlice, {"reproduce", std::to_string(id)});
  EXPECT_EQ(repro.exit_code, 0) << repro.out << repro.err;
  EXPECT_NE(repro.out.find("reproduced: the same metrics"), std::string::npos) << repro.out;
  // Export: the archive, written where Alice asked, as hers, with her code and the record.
  const std::string archive = home + "/run.tar.gz";
  auto exported = As(kAlice, {"export", std::to_string(id), "-o", archive}, home);
  EXPECT_EQ(exported.exit_code, 0) << exported.out << exported.err;
  struct stat st {};
  ASSERT_EQ(::stat(archive.c_str(), &st), 0);
  EXPECT_EQ(static_cast<int64_t>(st.st_uid), LookupUserByName(kAlice)->uid);
  const std::string list = (dir_ / "list.txt").string();
  Sh("tar tzf " + archive + " > " + list);
  const std::string listed = ReadFile(list);
  EXPECT_NE(listed.find("run-" + std::to_string(id) + "/record.json"), std::string::npos) << listed;
  EXPECT_NE(listed.find("run-" + std::to_string(id) + "/code/m.sh"), std::string::npos)
      << listed;
  // Bob may do none of it with Alice's run.
  auto bob = As(kBob, {"verify", std::to_string(id)});
  EXPECT_NE(bob.exit_code, 0);
  EXPECT_NE(bob.err.find("may not"), std::string::npos) << bob.err;
  auto bob_export = As(kBob, {"export", std::to_string(id), "-o", (dir_ / "out" / "b.tar.gz").string()});
  EXPECT_NE(bob_export.exit_code, 0);
  EXPECT_NE(bob_export.err.find("may not"), std::string::npos) << bob_export.err;
}

TEST_F(EscalationTest, AnotherUsersRunsOwnAlertsAreListedWithoutTheirWords) {
  // GET /alerts listed every run's own alerts (drover.alert: the run's words, which may quote its
  // stderr or paths) to every user; the event stream already hid them.
  const std::string home = Project(
      kAlice, "alarm",
      {{"alarm.yaml", "name: alarm\ncommand: sh a.sh\n"},
       {"a.sh",
        "echo '{\"drover_alert\": {\"message\": \"alice-private-words /home/alice/x "
        "\\u001b]0;PWN\\u0007\\u001b[2J\"}}'\n"
                "sleep 1\n"}});
  auto ran = As(kAlice, {"run", "alarm.yaml"}, home);
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  const std::string hers = RawRequestAs(kAlice, "GET", "/api/v1/alerts");
  EXPECT_NE(hers.find("alice-private-words"), std::string::npos) << hers;
  const std::string bobs = RawRequestAs(kBob, "GET", "/api/v1/alerts");
  EXPECT_NE(bobs.find("200 OK"), std::string::npos) << bobs;
  EXPECT_EQ(bobs.find("alice-private-words"), std::string::npos) << bobs;
  auto cli = As(kBob, {"alerts"});
  EXPECT_EQ(cli.out.find("alice-private-words"), std::string::npos) << cli.out << cli.err;
  // The daemon's log, which an admin tails, names the alert with its escapes shown, not sent.
  const std::string log = ReadFile((dir_ / "serve.err").string());
  EXPECT_NE(log.find("alice-private-words"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
}

TEST_F(EscalationTest, AnAdminCannotRunAUsersEditableProjectWithAnAdminsRights) {
  // GET /recipes offers admins every experiment's project folder; planning one and submitting it
  // (or naming it by hand) ran the user's code, which they can change at any moment, as the
  // admin or as root.
  const std::string ran_as = (dir_ / "out" / "proj-ran-as.txt").string();
  const std::string home = Project(
      kAlice, "proj", {{"spec.yaml", "name: proj\ncommand: sh -c \"id -un >> " + ran_as + "\"\n"}});
  ASSERT_EQ(As(kAlice, {"run", "spec.yaml"}, home).exit_code, 0);
  nlohmann::json body = {{"spec_yaml", ReadFile(home + "/spec.yaml")}, {"base_dir", home}};
  const std::string admin = RawRequestAs(kAdmin, "POST", "/api/v1/experiments", body.dump());
  EXPECT_NE(admin.find("403"), std::string::npos) << admin;
  EXPECT_NE(admin.find("is drover-t-alice's"), std::string::npos) << admin;
  auto root = testing::RunDrover({"--store", store_, "submit", "spec.yaml"}, home);
  EXPECT_NE(root.exit_code, 0) << root.out;
  EXPECT_NE(root.err.find("ask drover-t-alice to submit it"), std::string::npos) << root.err;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(ReadFile(ran_as), std::string(kAlice) + "\n");  // only her own run ran
}

TEST_F(EscalationTest, AnAccountThatTookARemovedUsersNameIsNotThatUser) {
  // Rights were decided by the submitter's name: a later account given a removed user's name
  // (a new uid) read their commands and logs and could retry their runs.
  constexpr const char* kCarol = "drover-t-carol";
  Sh(std::string("userdel ") + kCarol + " >/dev/null 2>&1; useradd -M -s /bin/sh " + kCarol);
  const std::string home =
      Project(kCarol, "old", {{"old.yaml", "name: old\ncommand: sh -c 'echo carol-secret-cmd'\n"}});
  ASSERT_EQ(As(kCarol, {"run", "old.yaml"}, home).exit_code, 0);
  const int64_t id = LastRun(kCarol)["id"].get<int64_t>();
  const int64_t exp = LastRun(kCarol)["experiment_id"].get<int64_t>();
  const int64_t old_uid = LookupUserByName(kCarol)->uid;
  Sh(std::string("userdel ") + kCarol + " && useradd -M -s /bin/sh -u " +
     std::to_string(old_uid + 1000) + " " + kCarol);
  ASSERT_NE(LookupUserByName(kCarol)->uid, old_uid);
  auto show = As(kCarol, {"show", std::to_string(id)});
  EXPECT_EQ(show.out.find("carol-secret-cmd"), std::string::npos) << show.out;
  auto logs = As(kCarol, {"logs", std::to_string(id)});
  EXPECT_NE(logs.exit_code, 0) << logs.out;
  EXPECT_NE(logs.err.find("earlier account"), std::string::npos) << logs.err;
  auto retry = As(kCarol, {"retry", std::to_string(exp), std::to_string(id)});
  EXPECT_NE(retry.exit_code, 0) << retry.out;
  EXPECT_NE(retry.err.find("earlier account"), std::string::npos) << retry.out << retry.err;
  Sh(std::string("userdel ") + kCarol);
}

// A lab daemon run by a service user (every run as that user): a reproduction's workdir is the
// store's own snapshot, not a folder the user must own.
class ServiceUserEscalationTest : public EscalationTest {
 protected:
  ServiceUserEscalationTest() { root_daemon_ = false; }
};

TEST_F(ServiceUserEscalationTest, AUserAndAnAdminReproduceAUsersRunOnAServiceUsersDaemon) {
  const std::string home =
      Project(kAlice, "svc", {{"svc.yaml", "name: svc\ncommand: sh m.sh\n"},
                              {"m.sh", "echo '{\"acc\": 0.25}'\n"}});
  ASSERT_EQ(As(kAlice, {"run", "svc.yaml"}, home).exit_code, 0);
  const int64_t id = LastRun(kAlice)["id"].get<int64_t>();
  auto mine = As(kAlice, {"reproduce", std::to_string(id)});
  EXPECT_EQ(mine.exit_code, 0) << mine.out << mine.err;
  const std::string reply =
      RawRequestAs(kAdmin, "POST", "/api/v1/runs/" + std::to_string(id) + "/reproduce", "{}");
  EXPECT_NE(reply.find("200 OK"), std::string::npos) << reply;
  // Both reproductions are Alice's experiments.
  auto runs = nlohmann::json::parse(As(kAlice, {"ls", "--mine", "--json"}).out);
  EXPECT_EQ(runs.size(), 3u) << runs.dump();
}

}  // namespace
}  // namespace drover
