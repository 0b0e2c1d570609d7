#include "cli/stores.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

namespace drover::cli {
namespace fs = std::filesystem;
namespace {

// At most this many lines are kept: past it, the list is rewritten with the stores that exist.
constexpr size_t kMaxListed = 1000;
// What is read of a list someone else grew or garbled: this many lines of at most 4 KiB each.
constexpr size_t kMaxRead = 10 * kMaxListed;
constexpr size_t kMaxLine = 4096;

std::string XdgDir(const char* var, const char* fallback) {
  if (const char* v = std::getenv(var); v && *v == '/') return v;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/" + fallback;
  return "";
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string line;
  while (out.size() < kMaxRead && std::getline(in, line)) {
    if (!line.empty() && line.front() == '/' && line.size() <= kMaxLine) out.push_back(line);
  }
  return out;
}

bool HoldsStore(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir + "/drover.db", ec);
}

}  // namespace

std::string UserConfigPath() {
  const std::string dir = XdgDir("XDG_CONFIG_HOME", ".config");
  return dir.empty() ? "" : dir + "/drover/config.yaml";
}

std::string StoresListPath() {
  const std::string dir = XdgDir("XDG_STATE_HOME", ".local/state");
  return dir.empty() ? "" : dir + "/drover/stores";
}

Result<std::optional<std::string>> UserDefaultStore() {
  const std::string path = UserConfigPath();
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) return std::optional<std::string>();
  if (fs::file_size(path, ec) > 64 * 1024) {
    return InvalidArgument(fmt::format("{} is over 64 KiB; it holds one setting: store: PATH", path));
  }
  try {
    YAML::Node root = YAML::LoadFile(path);
    if (!root || root.IsNull()) return std::optional<std::string>();
    if (!root.IsMap()) {
      return InvalidArgument(fmt::format("{}: write a mapping, such as store: ~/drover-store", path));
    }
    for (auto it = root.begin(); it != root.end(); ++it) {
      const std::string key = it->first.as<std::string>();
      if (key != "store") {
        return InvalidArgument(fmt::format(
            "{}: unknown key '{}'; the file holds store: PATH (the default store)", path, key));
      }
    }
    YAML::Node store = root["store"];
    if (!store || !store.IsScalar() || store.as<std::string>().empty()) {
      return InvalidArgument(fmt::format("{}: store must be a folder path, such as store: "
                                         "~/drover-store",
                                         path));
    }
    std::string dir = store.as<std::string>();
    if (dir.rfind("~/", 0) == 0) {
      const char* home = std::getenv("HOME");
      if (!home || !*home) return InvalidArgument(fmt::format("{}: ~ in store, but HOME is not set", path));
      dir = std::string(home) + dir.substr(1);
    }
    if (!fs::path(dir).is_absolute()) {
      return InvalidArgument(fmt::format(
          "{}: store '{}' is relative; write an absolute path (or ~/...): it applies in every "
          "folder",
          path, dir));
    }
    return std::optional<std::string>(fs::path(dir).lexically_normal().string());
  } catch (const YAML::Exception& e) {
    return InvalidArgument(fmt::format("{}: {}", path, e.what()));
  }
}

void RememberStore(const std::string& store_dir) {
  const std::string path = StoresListPath();
  if (path.empty()) return;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  if (::flock(fd, LOCK_EX) == 0) {
    std::vector<std::string> lines = ReadLines(path);
    bool listed = false;
    for (const std::string& l : lines) listed = listed || l == store_dir;
    if (!listed) {
      if (lines.size() >= kMaxListed) {
        // Keep the stores that still exist (each once), then this one.
        std::set<std::string> seen;
        std::string kept;
        for (const std::string& l : lines) {
          if (HoldsStore(l) && seen.insert(l).second) kept += l + "\n";
        }
        if (::ftruncate(fd, 0) == 0) {
          [[maybe_unused]] ssize_t w = ::write(fd, kept.data(), kept.size());
        }
      }
      const std::string line = store_dir + "\n";
      [[maybe_unused]] ssize_t w = ::write(fd, line.data(), line.size());
    }
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
}

std::vector<std::string> KnownStores() {
  std::vector<std::string> out;
  std::set<std::string> seen;
  const std::string path = StoresListPath();
  if (path.empty()) return out;
  for (const std::string& l : ReadLines(path)) {
    if (HoldsStore(l) && seen.insert(l).second) out.push_back(l);
  }
  return out;
}

}  // namespace drover::cli
