#!/usr/bin/env bash
# Sets up (packages + build) and runs every test: unit tests beside the code, launcher tests
# against real processes, and end-to-end tests of the drover binary and the examples.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --preset default "$@"
