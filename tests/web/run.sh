#!/usr/bin/env bash
# drover's web UI in Debian's chromium, driven by playwright-core, against a real daemon with fake
# GPUs and the digits example (tests/web/ui.test.mjs says what it checks). Needs `npm ci` here and
# in web/ (scripts/setup.sh runs both) and /usr/bin/chromium (apt-get install chromium).
# Screenshots, the daemon's output and the browser console go to $ARTIFACTS_DIR (default:
# test-artifacts/web beside DROVER_BIN, so build/test-artifacts/web for build/drover).
#   tests/web/run.sh DROVER_BIN
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
drover="$(realpath "${1:?usage: run.sh DROVER_BIN}")"
digits="$(realpath "$here/../../examples/digits")"
artifacts="${ARTIFACTS_DIR:-$(dirname "$drover")/test-artifacts/web}"
chromium="${CHROMIUM:-/usr/bin/chromium}"
[[ -d "$here/node_modules/playwright-core" ]] || { echo "run npm ci in $here first (scripts/setup.sh does)" >&2; exit 1; }
[[ -x "$chromium" ]] || { echo "no $chromium: apt-get install chromium (scripts/setup.sh does)" >&2; exit 1; }
mkdir -p "$artifacts"
exec node "$here/ui.test.mjs" "$drover" "$digits" "$artifacts" "$chromium"
