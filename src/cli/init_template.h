#pragma once
// drover init's starting point for a project (src/cli/init_template/, compiled in by
// cmake/embed_web.cmake): a PyTorch training script and its drover.yaml recipe.
#include <cstddef>
#include <string_view>

namespace drover::cli {

struct InitFile {
  std::string_view path;  // relative to the project folder: "train.py", "drover.yaml"
  std::string_view data;
};

extern const InitFile kInitFiles[];
extern const size_t kInitFileCount;

}  // namespace drover::cli
