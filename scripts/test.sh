#!/usr/bin/env bash
# Sets up (packages + build) and runs every test: unit tests beside the code, launcher tests
# against real processes, and end-to-end tests of the drover binary and the examples; then the
# sanitizer slot (scripts/sanitize.sh: the unit tests under ASan and UBSan, each fuzzer briefly).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
# The Slurm executor's tests need a one-node Slurm (docs/slurm.md, "The test cluster"): started here
# as root, stopped at the end; elsewhere those tests skip and say so.
if [[ $(id -u) -eq 0 ]]; then
  trap 'scripts/slurm-local.sh stop || true' EXIT
  { scripts/slurm-local.sh install >/dev/null && scripts/slurm-local.sh start; } ||
    echo "test: WARNING: the test Slurm did not start (see /var/log/slurm/): the Slurm tests skip" >&2
  # The container tests need podman and two images built here (docs/containers.md, "The test
  # images"): about 3 minutes the first time (the digits image is Debian with python3-torch).
  { scripts/podman-local.sh install && scripts/podman-local.sh images; } ||
    echo "test: WARNING: podman or its test images are not ready: the container tests skip" >&2
else
  echo "test: not root, so no test Slurm or podman is set up: their tests skip" >&2
fi
ctest --preset default "$@"
scripts/sanitize.sh
