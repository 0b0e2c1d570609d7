#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/worker.h"
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <chrono>

#include "common/files.h"
#include "common/hash.h"
#include "common/process.h"
#include "common/strings.h"
#include "common/subprocess.h"

namespace drover {
namespace {

TEST(StatusTest, TheOsErrorTravelsWithTheStatusNotInItsWords) {
  Status full = ErrnoStatus("writing 'x'", ENOSPC);
  EXPECT_EQ(full.os_error(), ENOSPC);
  EXPECT_EQ(full.WithContext("storing outputs").os_error(), ENOSPC);
  Status from_ec = IoStatus("copying 'y'", std::make_error_code(std::errc::no_space_on_device));
  EXPECT_EQ(from_ec.os_error(), ENOSPC);
  EXPECT_NE(from_ec.message().find("copying 'y': "), std::string::npos);
  // Words alone are not an errno: a file named so, quoted in a message, says nothing.
  Status quoted(Code::kIo, "cannot store 'No space left on device': Input/output error");
  EXPECT_EQ(quoted.os_error(), 0);
  EXPECT_EQ(ErrnoStatus("reading", EIO).os_error(), EIO);
}

// A child that has exited and is not reaped yet is a zombie: kill(pid, 0) still finds it, but it
// holds nothing (no lock, no port) and will never answer. A daemon reparented to an init that
// does not reap (a container without one) stays such a zombie for good.
TEST(Process, AZombieIsNotAlive) {
  EXPECT_TRUE(ProcessAlive(::getpid()));
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Its exit, seen without reaping it.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(::kill(child, 0), 0) << "not a zombie yet";
  EXPECT_FALSE(ProcessAlive(child));
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(ProcessAlive(child));
  EXPECT_FALSE(ProcessAlive(0));
  EXPECT_FALSE(ProcessAlive(-1));
  EXPECT_FALSE(ProcessAlive(int64_t{1} << 40));
}

TEST(Strings, ParsesAndFormatsSizes) {
  EXPECT_EQ(*ParseBytes("6GiB"), 6LL << 30);
  EXPECT_EQ(*ParseBytes("512MiB"), 512LL << 20);
  EXPECT_EQ(*ParseBytes("1.5GB"), 1'500'000'000);
  EXPECT_EQ(*ParseBytes("1024"), 1024);
  EXPECT_EQ(FormatBytes(6LL << 30), "6GiB");
  EXPECT_EQ(FormatBytes(1536LL << 20), "1.5GiB");
  auto bad = ParseBytes("6 gigs");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "'6 gigs' is not a size; write a number with a unit, such as 6GiB, 512MiB or 8GB");
  EXPECT_FALSE(ParseBytes("-1GiB").ok());
}

TEST(Strings, CountsWithTheRightNoun) {
  EXPECT_EQ(Count(1, "run"), "1 run");
  EXPECT_EQ(Count(0, "run"), "0 runs");
  EXPECT_EQ(Count(2, "run"), "2 runs");
  EXPECT_EQ(Count(1, "retry", "retries"), "1 retry");
  EXPECT_EQ(Count(3, "retry", "retries"), "3 retries");
}

TEST(Strings, LastLinesKeepTheEndOfAFailure) {
  const std::string trace =
      "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
      "    main()\n\n\nRuntimeError: simulated crash at epoch 3\r\n\n";
  EXPECT_EQ(LastLines(trace, 2, 1000), "    main()\nRuntimeError: simulated crash at epoch 3");
  EXPECT_EQ(LastLines(trace, 8, 1000),
            "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
            "    main()\nRuntimeError: simulated crash at epoch 3");
  EXPECT_EQ(LastLines("", 8, 100), "");
  EXPECT_EQ(LastLines("\n \n", 8, 100), "");
  // Cut at the front, never inside a character.
  EXPECT_EQ(LastLines("abcdef", 1, 3), "...def");
  EXPECT_EQ(LastLines("x\u00e9\u00e9", 1, 3), "...\u00e9");  // 2-byte characters
  EXPECT_LE(LastLines(std::string(10000, 'y'), 8, 2048).size(), 2048u + 3);
}

TEST(Strings, ParsesDurations) {
  EXPECT_EQ(*ParseDurationMs("90s"), 90'000);
  EXPECT_EQ(*ParseDurationMs("1h30m"), 5'400'000);
  EXPECT_EQ(*ParseDurationMs("500ms"), 500);
  EXPECT_EQ(*ParseDurationMs("2.5"), 2500);
  EXPECT_FALSE(ParseDurationMs("soon").ok());
  EXPECT_FALSE(ParseDurationMs("5 parsecs").ok());
  EXPECT_FALSE(ParseDurationMs("inf").ok());
  EXPECT_FALSE(ParseDurationMs("1e300").ok());
  EXPECT_FALSE(ParseDurationMs("9999999h").ok());
  EXPECT_EQ(FormatDuration(4200), "4.2s");
  EXPECT_EQ(FormatDuration(185'000), "3m05s");
}

TEST(Strings, SplitsCommandLinesLikeSh) {
  auto w = SplitCommandLine(R"(python "my script.py" --name 'a b' x\ y)");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, (std::vector<std::string>{"python", "my script.py", "--name", "a b", "x y"}));
  EXPECT_FALSE(SplitCommandLine("echo 'open").ok());
  EXPECT_FALSE(SplitCommandLine("   ").ok());
}

TEST(Strings, QuotesForShAndSuggests) {
  EXPECT_EQ(ShellQuote("plain-word"), "plain-word");
  EXPECT_EQ(ShellQuote("; rm -rf ~"), "'; rm -rf ~'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\"'\"'s'");
  EXPECT_EQ(ClosestMatch("prams", {"params", "priority", "name"}), "params");
  EXPECT_FALSE(ClosestMatch("zzzzzz", {"params", "name"}).has_value());
}

TEST(Hash, Sha256KnownAnswer) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 h;
  h.Update("a");
  h.Update("bc");
  EXPECT_EQ(h.HexDigest(), Sha256Hex("abc"));
}

TEST(Strings, HtmlEscape) {
  EXPECT_EQ(HtmlEscape("<a href=\"x\">Tom & 'Jerry'</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;");
  EXPECT_EQ(HtmlEscape("plain 中文"), "plain 中文");
  EXPECT_EQ(HtmlEscape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
  EXPECT_EQ(HtmlEscape("tab\tnl\n\x1f"), "tab\tnl\n");
  EXPECT_EQ(HtmlEscape("\xe2\x82"), "\xef\xbf\xbd\xef\xbf\xbd");  // cut sequence
  EXPECT_EQ(HtmlEscape("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");  // overlong '/'
  EXPECT_EQ(HtmlEscape("\xf0\x9f\x93\x88"), "\xf0\x9f\x93\x88");  // an emoji stays
}

TEST(Hash, HmacSha256KnownAnswer) {
  // RFC 4231, test case 2.
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Subprocess, CapturesStdoutExitAndEnvironment) {
  auto r = RunAndCapture({"sh", "-c", "echo $DROVER_T; pwd; exit 3"},
                         {.cwd = "/tmp", .unset_env = {"HOME"}, .set_env = {"DROVER_T=yes"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->out, "yes\n/tmp\n");
  EXPECT_EQ(r->exit_code, 3);
  auto missing = RunAndCapture({"no-such-program-drover"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
}

TEST(Subprocess, AHelperThatHangsIsKilledAtTheTimeout) {
  // exec: the shell becomes sleep, so the kill reaches the process holding the pipe.
  auto hung = RunAndCapture({"sh", "-c", "echo started; exec sleep 30"}, {.timeout_ms = 300});
  ASSERT_FALSE(hung.ok());
  EXPECT_EQ(hung.status().code(), Code::kUnavailable);
  EXPECT_NE(hung.status().message().find("did not finish within 300 ms"), std::string::npos)
      << hung.status().message();
  // One that finishes in time is not affected.
  auto quick = RunAndCapture({"sh", "-c", "echo ok"}, {.timeout_ms = 30000});
  ASSERT_TRUE(quick.ok()) << quick.status().message();
  EXPECT_EQ(quick->out, "ok\n");
}

TEST(Subprocess, ATimeoutKillsWhatTheHelperStartedToo) {
  // The shell's children hold the pipe open after the shell itself is gone; its whole process
  // group is killed, so the call returns at the timeout instead of when `sleep` would end.
  auto start = std::chrono::steady_clock::now();
  auto hung = RunAndCapture({"sh", "-c", "sleep 30 & sleep 30 & wait"}, {.timeout_ms = 300});
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(hung.ok());
  EXPECT_EQ(hung.status().code(), Code::kUnavailable);
  EXPECT_LT(took, std::chrono::seconds(10));
  // A helper that closes its stdout and goes on is still held to its time.
  start = std::chrono::steady_clock::now();
  auto closed = RunAndCapture({"sh", "-c", "exec >/dev/null; sleep 30"}, {.timeout_ms = 300});
  ASSERT_FALSE(closed.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Issue 40: a daemon stopped while a package listing hung left the helper and the hung
// interpreter running for minutes. A stopping owner kills the helper's group at once...
TEST(Subprocess, AStoppingOwnerKillsItsHelperAtOnce) {
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto hung = RunAndCapture({"sh", "-c", "sleep 30 & exec sleep 30"},
                            {.timeout_ms = 60'000, .stop = [&] { return stop.load(); }});
  const auto took = std::chrono::steady_clock::now() - start;
  stopper.join();
  ASSERT_FALSE(hung.ok());
  EXPECT_EQ(hung.status().code(), Code::kCancelled) << hung.status().message();
  EXPECT_LT(took, std::chrono::seconds(5));
}

// ... and a helper whose drover died ends itself: it is killed with the thread that waits for it
// (a daemon killed with SIGKILL leaves no listing behind).
TEST(Subprocess, AHelperEndsWhenTheDroverThatStartedItDies) {
  const std::string pid_file =
      ::testing::TempDir() + "/drover-helper-pid-" + std::to_string(::getpid());
  std::filesystem::remove(pid_file);
  const pid_t owner = ::fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    // Its own interpreter: `exec sleep` keeps the pid the file names.
    (void)RunAndCapture({"sh", "-c", "echo $$ > " + pid_file + "; exec sleep 30"});
    ::_exit(0);
  }
  pid_t helper = 0;
  for (int i = 0; i < 200 && helper == 0; ++i) {
    std::ifstream in(pid_file);
    in >> helper;
    if (helper == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(helper, 0);
  ::kill(owner, SIGKILL);
  ::waitpid(owner, nullptr, 0);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    // Reaped by init once killed; a zombie counts as gone.
    std::ifstream stat("/proc/" + std::to_string(helper) + "/stat");
    std::string line;
    const bool listed = static_cast<bool>(std::getline(stat, line));
    const size_t paren = line.rfind(')');
    const char state = listed && paren != std::string::npos && paren + 2 < line.size()
                           ? line[paren + 2]
                           : 'X';
    gone = state == 'X' || state == 'Z';
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "the helper " << helper << " outlived the drover that started it";
  if (!gone) ::kill(helper, SIGKILL);
  std::filesystem::remove(pid_file);
}

TEST(Subprocess, AHelperThatPrintsTooMuchIsKilled) {
  auto flood = RunAndCapture({"yes"}, {.max_output_bytes = 1 << 20});
  ASSERT_FALSE(flood.ok());
  EXPECT_EQ(flood.status().code(), Code::kUnavailable);
  EXPECT_NE(flood.status().message().find("printed more than"), std::string::npos);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

TEST(ReadBoundedFileTest, ReadsARegularFileAndRefusesTheRestBeforeReadingThem) {
  std::string dir = ::testing::TempDir() + "/drover-bounded-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::string file = dir + "/spec.yaml";
  { std::ofstream(file) << "name: x\n"; }
  Result<std::string> ok = ReadBoundedFile(file, 100, "spec file", "give the YAML file");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, "name: x\n");
  Result<std::string> missing = ReadBoundedFile(dir + "/nope", 100, "spec file", "hint");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_FALSE(ReadBoundedFile(dir, 100, "spec file", "hint").ok());
  // A device that never ends and a FIFO nobody writes to return at once.
  Result<std::string> zero = ReadBoundedFile("/dev/zero", 100, "spec file", "give the YAML file");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(),
            "'/dev/zero' is not a regular file, so not a spec file; give the YAML file");
  std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(ReadBoundedFile(fifo, 100, "spec file", "hint").ok());
  // Over the limit: refused from its size, before it is read.
  Result<std::string> big = ReadBoundedFile(file, 4, "spec file", "hint");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("is 8 bytes, over the limit of 4"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace drover

namespace drover {
namespace {

TEST(ParseBytesTest, ASizePastWhatFitsIsAnErrorNotAWrappedNumber) {
  Result<int64_t> huge = ParseBytes("99999999999999999999999");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(),
            "'99999999999999999999999' is too large a size; the most drover takes is 4EiB (write "
            "e.g. 80GiB)");
  EXPECT_FALSE(ParseBytes("99999999999GiB").ok());
  EXPECT_FALSE(ParseBytes("1e300").ok());
  Result<int64_t> ok = ParseBytes("4096TiB");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, int64_t{4096} << 40);
}

TEST(Worker, AShutdownWaitsForTheJobInProgressNotForAQueueSomeoneFilled) {
  std::atomic<int> done{0};
  Worker<int, int> w([&](int& ms, const std::function<bool()>&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return ++done;
  });
  for (int i = 0; i < 20; ++i) w.Start(200);  // 4 s of work, queued
  const auto t0 = std::chrono::steady_clock::now();
  w.WaitIdleFor(300);
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(waited, std::chrono::milliseconds(1500));
  EXPECT_FALSE(w.Busy());
  EXPECT_LT(done.load(), 20);
  EXPECT_GE(done.load(), 1);
}

}  // namespace
}  // namespace drover
