#!/usr/bin/env bash
# Installs what drover needs to build, test and run its examples on Debian 12, then builds it.
#   scripts/setup.sh            # packages + build (build/drover)
#   scripts/setup.sh --no-build # packages only
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  # build
  g++ cmake ninja-build pkg-config git
  # the debug preset: clang with AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer
  clang libclang-rt-14-dev
  # libraries (docs/dependencies.md says why each)
  libyaml-cpp-dev nlohmann-json3-dev libsqlite3-dev libcli11-dev libspdlog-dev libfmt-dev
  libssl-dev libgtest-dev libgmock-dev libcpp-httplib-dev libeigen3-dev
  libprotobuf-dev protobuf-compiler libmuparser-dev
  # the digits example and its tests: PyTorch on CPU, sklearn's bundled digits data
  python3 python3-torch python3-sklearn
  # tests read the store with the sqlite3 shell; procps gives ps/pgrep for the no-orphans checks
  sqlite3 procps
  # promtool checks a live /metrics scrape in the tests (the package also brings the server)
  prometheus
  # the web UI's browser tests drive Debian's Chromium with playwright-core; a CJK font so their
  # screenshots show the recipes' Chinese aliases
  chromium fonts-wqy-microhei
)
# The official MCP TypeScript SDK client drives `drover mcp` and /mcp in the tests. A machine that
# already has Node.js with its own npm (NodeSource's nodejs bundles npm and conflicts with Debian's
# npm package) keeps it; otherwise Debian's nodejs and npm are installed.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm packages, pinned by their package-lock.json: uPlot, compiled into the web UI (web/); the
# official MCP SDK client (tests/mcp/) and playwright-core (tests/web/) for the tests.
npm_ci() {
  [[ -d $1/node_modules/$2 ]] || (cd "$1" && npm ci --no-audit --no-fund --loglevel=error)
}
npm_ci web uplot
npm_ci tests/mcp @modelcontextprotocol/sdk
[[ ! -f tests/web/package.json ]] || npm_ci tests/web playwright-core

if [[ ${1:-} != --no-build ]]; then
  cmake --preset default >/dev/null
  cmake --build --preset default
fi
