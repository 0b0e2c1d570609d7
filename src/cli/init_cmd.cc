// drover init [DIR]: writes a starting point into a project (src/cli/init_template/): a PyTorch
// training script (seeds fixed, mixed precision where CUDA exists, gradient clipping, checkpoint
// and resume, drover.log calls) and the drover.yaml recipe `drover plan` reads. Its command names
// a Python that imports torch on this machine (PickPython), and the next steps it prints work as
// printed. docs/python.md.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "cli/common.h"
#include "cli/init_template.h"
#include "common/strings.h"
#include "common/subprocess.h"
#include "engine/attempt_setup.h"

namespace drover::cli {
namespace {

namespace fs = std::filesystem;

struct InitFlags {
  std::string dir = ".";
  bool force = false;
};

Status WriteNew(const fs::path& path, std::string_view data, bool force, bool exec) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (force ? O_TRUNC : O_EXCL);
  int fd = open(path.c_str(), flags, exec ? 0755 : 0644);
  if (fd < 0 && errno == EEXIST) {
    return Status(Code::kFailedPrecondition,
                  fmt::format("{} exists; drover init leaves it alone (--force writes over it)",
                              path.string()));
  }
  if (fd < 0) return ErrnoStatus("cannot write " + path.string());
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status st = ErrnoStatus("cannot write " + path.string());
      close(fd);
      return st;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return ErrnoStatus("cannot write " + path.string());
  return Status::Ok();
}

// The Python train.py runs with here: the first that imports torch of `python3` as PATH finds it,
// `python`, and Debian's /usr/bin/python3 (which sees python3-torch when PATH's python3 is
// another, e.g. pyenv's). `command` is what drover.yaml says: `python3` when PATH's does, else
// the path of the one that does; `python3` with nothing found (said, with what to install).
struct PythonChoice {
  std::string command = "python3";
  std::string torch;                // torch's version; "" when none imports it
  std::vector<std::string> others;  // those that do not, and why: "python3 (/x/python3): ..."
};

// Where a shell finds `name` (itself when it has a slash; "" when it is nowhere on PATH).
std::string OnPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  for (const std::string& dir : Split(path ? path : "/usr/bin:/bin", ':')) {
    const std::string full = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (access(full.c_str(), X_OK) == 0) return full;
  }
  return "";
}

PythonChoice PickPython() {
  // Prints a line, then torch's version or the import's error.
  constexpr char kProbe[] =
      "import sys\n"
      "print(sys.executable)\n"
      "try:\n"
      "    import torch\n"
      "    print('ok ' + torch.__version__)\n"
      "except Exception as e:\n"
      "    print('no ' + type(e).__name__ + ': ' + str(e))\n";
  PythonChoice choice;
  bool first = true;
  for (const char* candidate : {"python3", "python", "/usr/bin/python3"}) {
    CaptureOptions o;
    o.timeout_ms = 60'000;  // importing torch takes a few seconds
    o.max_output_bytes = 64 * 1024;
    Result<Captured> got = RunAndCapture({candidate, "-c", kProbe}, o);
    std::vector<std::string> lines;
    if (got.ok()) lines = Split(got->out, '\n');
    const std::string where = OnPath(candidate);  // as a shell finds it (a shim, a wrapper)
    if (got.ok() && got->exit_code == 0 && lines.size() >= 2 && lines[1].starts_with("ok ")) {
      if (!first) choice.command = where.empty() ? candidate : where;
      choice.torch = lines[1].substr(3);
      return choice;
    }
    std::string why = !got.ok()                                   ? got.status().message()
                      : lines.size() >= 2 && lines[1].size() > 3 ? lines[1].substr(3)
                                                                  : "it did not answer";
    if (got.ok() || got.status().code() != Code::kNotFound) {
      choice.others.push_back(
          fmt::format("{}{}: {}", candidate, where.empty() || where == candidate ? ""
                                                 : " (" + where + ")", why));
    }
    first = false;
  }
  return choice;
}

int InitCmd(Globals& g, const InitFlags& f) {
  std::error_code ec;
  fs::create_directories(f.dir, ec);
  if (ec) {
    return ReportError(Status(Code::kIo, fmt::format("cannot create {}: {}", f.dir, ec.message())));
  }
  // Nothing is written unless everything can be: a half-written project is worse than none.
  if (!f.force) {
    for (size_t i = 0; i < kInitFileCount; ++i) {
      fs::path p = fs::path(f.dir) / kInitFiles[i].path;
      if (fs::exists(fs::symlink_status(p, ec))) {
        return ReportError(Status(
            Code::kFailedPrecondition,
            fmt::format("{} exists; drover init leaves it alone (--force writes over it)",
                        p.string())));
      }
    }
  }
  const PythonChoice python = PickPython();
  for (size_t i = 0; i < kInitFileCount; ++i) {
    const InitFile& file = kInitFiles[i];
    std::string data(file.data);
    if (file.path == "drover.yaml") {
      // The template says `command: python3 train.py ...`: the Python picked here instead.
      const std::string from = "command: python3 ";
      if (size_t at = data.find(from); at != std::string::npos && python.command != "python3") {
        data.replace(at, from.size(),
                     fmt::format("# {}: a Python that imports torch on this machine, chosen by drover "
                                 "init (python3 on PATH does not)\ncommand: {} ",
                                 python.command, python.command));
      }
    }
    Status st = WriteNew(fs::path(f.dir) / file.path, data, f.force, file.path.ends_with(".py"));
    if (!st.ok()) return ReportError(st);
    fmt::print("wrote {}\n", (fs::path(f.dir) / file.path).string());
  }
  if (!python.torch.empty()) {
    fmt::print("\ntrain.py runs with {} (torch {}){}\n", python.command, python.torch,
               python.others.empty()
                   ? ""
                   : fmt::format("; not {}", Join(python.others, "; ")));
    fmt::print("  (another interpreter: change `command:` in {})\n",
               (fs::path(f.dir) / "drover.yaml").string());
  } else {
    fmt::print(stderr,
               "\ndrover: no Python here imports torch ({}): train.py needs PyTorch. Install it "
               "(`pip install torch` in your environment, or `apt-get install python3-torch` for "
               "/usr/bin/python3), or name an interpreter that has it in `command:` in {}\n",
               python.others.empty() ? "none found" : Join(python.others, "; "),
               (fs::path(f.dir) / "drover.yaml").string());
  }
  // By hand, the script imports drover's client from this drover's python/ folder (drover puts it
  // on every run's PYTHONPATH).
  const std::string client = PythonClientDir();
  const std::string by_hand =
      client.empty() ? fmt::format("{} train.py --epochs 2", python.command)
                     : fmt::format("PYTHONPATH={} {} train.py --epochs 2", ShellQuote(client),
                                   python.command);
  fmt::print(
      "\nnext:\n"
      "  cd {}\n"
      "  {}   # by hand, once (CPU unless CUDA is there)\n"
      "  drover plan \"lr 1e-4 to 1e-2, 3 values, 2 seeds\"\n"
      "  drover ask --yes \"hidden 64 and 256, 3 seeds\"   # plan, then run it\n",
      ShellQuote(f.dir), by_hand);
  return kExitOk;
}

}  // namespace

Command RegisterInit(CLI::App& root, Globals& g) {
  auto f = std::make_shared<InitFlags>();
  CLI::App* app = root.add_subcommand(
      "init", "Write a starting point into a project: train.py (PyTorch) and its drover.yaml");
  app->add_option("dir", f->dir, "Project folder (default: the current one)");
  app->add_flag("--force", f->force, "Write over train.py and drover.yaml when they exist");
  return {app, [&g, f] { return InitCmd(g, *f); }};
}

}  // namespace drover::cli
