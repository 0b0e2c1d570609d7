#!/usr/bin/env bash
# The sanitizer slot of the tests: builds the debug preset (clang, ASan, UBSan, the libFuzzer
# harnesses) and runs the unit tests under it, then each fuzz harness for DROVER_FUZZ_SECONDS
# (20 s) from its seed corpus. scripts/test.sh runs it after the main suite; alone:
#   scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset debug >/dev/null
# The unit tests and the harnesses (the end-to-end tests run under the main build).
modules=(common model spec plan sched gpu store sim exec protocol mcp report watch engine config server
         daemon cli)
fuzzers=(spec recipe_plan protocol mcp metric_lines trace config)
targets=(drover "${modules[@]/%/_test}" "${fuzzers[@]/#/fuzz_}")
cmake --build --preset debug --target "${targets[@]}"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --preset debug -L unit
ctest --preset debug -L fuzz
