#!/usr/bin/env bash
# Sets up (packages + build) and runs every test: unit tests beside the code, launcher tests
# against real processes, and end-to-end tests of the drover binary and the examples; then the
# sanitizer slot (scripts/sanitize.sh: the unit tests under ASan and UBSan, each fuzzer briefly).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --preset default "$@"
scripts/sanitize.sh
