#!/usr/bin/env bash
# The sanitizer slot of the tests: builds the debug preset (clang, ASan, UBSan, the libFuzzer
# harnesses) and runs the unit tests under it, then each fuzz harness for DROVER_FUZZ_SECONDS
# (20 s) from its seed corpus. scripts/test.sh runs it after the main suite; alone:
#   scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset debug >/dev/null
# The unit tests and the harnesses (the end-to-end tests run under the main build).
targets=(drover)
for dir in src/*/; do  # a module's unit tests, where it has any (cmake/modules.cmake)
  m=$(basename "$dir")
  compgen -G "src/$m/*_test.cc" >/dev/null && targets+=("${m}_test")
done
for harness in fuzz/*_fuzz.cc; do
  h=$(basename "$harness" _fuzz.cc)
  targets+=("fuzz_$h")
done
cmake --build --preset debug --target "${targets[@]}"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --preset debug -L unit
ctest --preset debug -L fuzz
