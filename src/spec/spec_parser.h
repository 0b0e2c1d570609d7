#pragma once
// YAML spec -> validated Spec. Every error names file:line:column and says what to do; unknown
// keys get a "did you mean". docs/spec.md is the reference for the format.
#include <string>
#include <vector>

#include "common/status.h"
#include "model/spec.h"

namespace drover {

// `overrides` are --set key=value pairs, applied to the YAML before validation. A key is a
// dotted path (retries=2, resources.gpus=1, params.lr=[0.1,0.01]); a bare key that names a
// parameter sets that parameter (lr=0.1). Values are parsed as YAML.
Result<Spec> ParseSpecFile(const std::string& path, const std::vector<std::string>& overrides = {});

// The largest spec file read (a grid of 100,000 values is about a megabyte).
inline constexpr size_t kMaxSpecBytes = 16 << 20;
// The most paths a spec's data: may name (each is a mount in every run).
inline constexpr size_t kMaxDataMounts = 32;
// A spec file's text: a regular file of at most kMaxSpecBytes (common/files.h).
// `-` for the path: the spec is read from standard input (display name <stdin>, relative paths
// from the current folder).
inline constexpr char kSpecFromStdin[] = "-";
Result<std::string> ReadSpecFile(const std::string& path);
// `display_name` is used in error messages; relative workdirs resolve against `base_dir`.
Result<Spec> ParseSpecString(const std::string& yaml, const std::string& display_name,
                             const std::string& base_dir,
                             const std::vector<std::string>& overrides = {});

}  // namespace drover
