// drover init [DIR]: writes a starting point into a project (src/cli/init_template/): a PyTorch
// training script (seeds fixed, mixed precision where CUDA exists, gradient clipping, checkpoint
// and resume, drover.log calls) and the drover.yaml recipe `drover plan` reads. docs/python.md.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "cli/common.h"
#include "cli/init_template.h"

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
  for (size_t i = 0; i < kInitFileCount; ++i) {
    const InitFile& file = kInitFiles[i];
    Status st = WriteNew(fs::path(f.dir) / file.path, file.data, f.force,
                         file.path.ends_with(".py"));
    if (!st.ok()) return ReportError(st);
    fmt::print("wrote {}\n", (fs::path(f.dir) / file.path).string());
  }
  fmt::print(
      "\nnext:\n"
      "  cd {}\n"
      "  /usr/bin/python3 train.py --epochs 2          # runs on CPU as written\n"
      "  drover plan \"lr 1e-4 to 1e-2, 3 values, 2 seeds\"\n"
      "  drover ask --yes \"hidden 64 and 256, 3 seeds\"   # plan, then run it\n",
      f.dir);
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
