// The web UI's files: compiled in (web_assets.h), or read from DROVER_WEB_DIR while working on
// the UI.
#include <cstdlib>
#include <filesystem>

#include "common/files.h"
#include "server/web_assets.h"

namespace drover::server {

std::string ContentTypeFor(std::string_view path) {
  auto ends = [&](std::string_view ext) { return path.ends_with(ext); };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js") || ends(".mjs")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  if (ends(".json")) return "application/json";
  return "application/octet-stream";
}

namespace fs = std::filesystem;

// A file of the UI read from DROVER_WEB_DIR is at most this big.
constexpr size_t kMaxWebFileBytes = 16 << 20;

std::optional<WebFile> FindWebFile(std::string_view path) {
  // Only plain relative names: no "..", no absolute paths, no hidden files.
  if (path.empty() || path.front() == '/' || path.find("..") != std::string_view::npos ||
      path.find("/.") != std::string_view::npos || path.front() == '.') {
    return std::nullopt;
  }
  if (const char* dir = std::getenv("DROVER_WEB_DIR"); dir != nullptr && *dir != '\0') {
    std::string base(dir);
    std::string file = base + "/" + std::string(path);
    if (path.starts_with("uPlot.")) file = base + "/node_modules/uplot/dist/" + std::string(path);
    // These are served without a token (the sign-in page needs them): a symlink is followed
    // only to a regular file inside the folder, never out of it (to a token, /etc/passwd).
    std::error_code ec;
    const fs::path root = fs::canonical(base, ec);
    if (ec) return std::nullopt;
    const fs::path real = fs::canonical(file, ec);
    if (ec) return std::nullopt;
    const fs::path inside = real.lexically_relative(root);
    if (inside.empty() || *inside.begin() == "..") return std::nullopt;
    auto bytes = ReadBoundedFile(real.string(), kMaxWebFileBytes, "web file", "");
    if (!bytes.ok()) return std::nullopt;
    return WebFile{std::move(*bytes), ContentTypeFor(path)};
  }
  for (size_t i = 0; i < kWebAssetCount; ++i) {
    if (kWebAssets[i].path == path) {
      return WebFile{std::string(kWebAssets[i].data), ContentTypeFor(path)};
    }
  }
  return std::nullopt;
}

}  // namespace drover::server
