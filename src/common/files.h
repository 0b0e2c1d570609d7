#pragma once
// Reading a file a user or a request names (a spec, a recipe, the config), bounded: only a
// regular file, opened without blocking (a FIFO must not hang the reader), at most `max_bytes`
// read (a device such as /dev/zero, or a huge file, is refused before its content is).
#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace drover {

// `what` names the file in errors ("spec file", "recipe"); `hint` says what to give instead
// ("give the YAML file"). NotFound when there is no such file; InvalidArgument for a directory,
// something that is not a regular file, or one over the limit.
Result<std::string> ReadBoundedFile(const std::string& path, size_t max_bytes,
                                    std::string_view what, std::string_view hint);

}  // namespace drover
