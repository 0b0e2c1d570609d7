#pragma once
// The web UI's files (web/ and uPlot's dist files), compiled into the binary by
// cmake/embed_web.cmake so the daemon needs nothing installed beside it. For work on the UI,
// DROVER_WEB_DIR=<checkout>/web makes the daemon read them from disk on every request instead.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace drover::server {

struct WebAsset {
  std::string_view path;  // relative to web/ ("app.js", "js/run.js"), or uPlot's file name
  std::string_view data;
};

extern const WebAsset kWebAssets[];
extern const size_t kWebAssetCount;

struct WebFile {
  std::string data;
  std::string content_type;
};

// A file of the UI by its path ("index.html", "uPlot.iife.min.js"), from DROVER_WEB_DIR when set,
// else compiled in; nothing for unknown paths and for paths that try to leave the folder.
std::optional<WebFile> FindWebFile(std::string_view path);
// "text/html; charset=utf-8", "text/javascript; charset=utf-8", ... by extension.
std::string ContentTypeFor(std::string_view path);

}  // namespace drover::server
