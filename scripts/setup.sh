#!/usr/bin/env bash
# Installs what drover needs to build, test and run its examples on Debian 12, then builds it.
#   scripts/setup.sh            # packages + build (build/drover)
#   scripts/setup.sh --no-build # packages only
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  # build
  g++ cmake ninja-build pkg-config git
  # libraries (docs/dependencies.md says why each)
  libyaml-cpp-dev nlohmann-json3-dev libsqlite3-dev libcli11-dev libspdlog-dev libfmt-dev
  libssl-dev libgtest-dev libgmock-dev libcpp-httplib-dev
  # the digits example and its tests: PyTorch on CPU, sklearn's bundled digits data
  python3 python3-torch python3-sklearn
  # tests read the store with the sqlite3 shell; procps gives ps/pgrep for the no-orphans checks
  sqlite3 procps
  # promtool checks a live /metrics scrape in the tests (the package also brings the server)
  prometheus
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

# npm packages for the tests, pinned by tests/mcp/package-lock.json.
if [[ ! -d tests/mcp/node_modules/@modelcontextprotocol/sdk ]]; then
  (cd tests/mcp && npm ci --no-audit --no-fund --loglevel=error)
fi

if [[ ${1:-} != --no-build ]]; then
  cmake --preset default >/dev/null
  cmake --build --preset default
fi
