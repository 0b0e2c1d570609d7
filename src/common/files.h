#pragma once
// Reading a file a user or a request names (a spec, a recipe, the config), bounded: only a
// regular file, opened without blocking (a FIFO must not hang the reader), at most `max_bytes`
// read (a device such as /dev/zero, or a huge file, is refused before its content is). And the
// one way drover replaces a small file of its own whole (WriteFileAtomically).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace drover {

// `what` names the file in errors ("spec file", "recipe"); `hint` says what to give instead
// ("give the YAML file"). NotFound when there is no such file; InvalidArgument for a directory,
// something that is not a regular file, or one over the limit.
// `owner`, when set: the file must belong to that uid, checked on the descriptor that is read
// (never a stat before the open: the path could be swapped between the two); PermissionDenied
// otherwise, saying nothing of the content.
Result<std::string> ReadBoundedFile(const std::string& path, size_t max_bytes,
                                    std::string_view what, std::string_view hint,
                                    std::optional<int64_t> owner = std::nullopt);

struct AtomicWrite {
  unsigned mode = 0644;  // the file's permission bits
  // Synced before it replaces the old file, so a power cut leaves the old one or the new one,
  // whole (a revoked token stays revoked). Off only for files rewritten often that a crash may
  // lose (a foreground engine's request files).
  bool sync = true;
};

// Replaces `path` with `data`: written to a fresh temporary name in the same folder (mkostemp: a
// fixed name could be taken by anyone who can write there), synced, renamed over `path`; on any
// failure the temporary file is removed and the old file is left as it was. The error names
// `path` and errno's words.
Status WriteFileAtomically(const std::string& path, std::string_view data,
                           const AtomicWrite& how = {});

}  // namespace drover
