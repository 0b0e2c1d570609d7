// The spec parser and grid counting: any bytes as a spec file. A spec that parses must count,
// expand (when small) to exactly its count, and render every run's command.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "spec/expand.h"
#include "spec/spec_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace drover;
  std::string text(reinterpret_cast<const char*>(data), size);
  // A first line "#set a=b;c=d" gives --set overrides, so they are fuzzed with the file.
  std::vector<std::string> overrides;
  if (text.rfind("#set ", 0) == 0) {
    size_t eol = text.find('\n');
    std::string line = text.substr(5, eol == std::string::npos ? std::string::npos : eol - 5);
    size_t start = 0;
    while (start <= line.size()) {
      size_t semi = line.find(';', start);
      if (semi == std::string::npos) semi = line.size();
      overrides.push_back(line.substr(start, semi - start));
      start = semi + 1;
    }
  }
  Result<Spec> spec = ParseSpecString(text, "fuzz.yaml", "/tmp", overrides);
  if (!spec.ok()) return 0;
  int64_t count = CountGrid(*spec);
  if (count < 0) std::abort();
  if (count > 0 && count <= 512) {
    std::vector<Json> runs = ExpandGrid(*spec);
    if (static_cast<int64_t>(runs.size()) != count) std::abort();
    for (const Json& params : runs) {
      Result<std::vector<std::string>> argv = RenderCommand(*spec, params);
      if (argv.ok()) (void)Fingerprint(*spec, *argv, params, "snapshot");
    }
  }
  return 0;
}
