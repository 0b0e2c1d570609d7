#!/usr/bin/env bash
# Installs what drover needs on Debian 12 and builds it.
#   scripts/setup.sh                    # what building and running drover needs; builds build/drover
#   scripts/setup.sh --tests            # also what the tests need; builds every target (test binaries too)
#   scripts/setup.sh [--tests] --no-build   # packages only
set -euo pipefail
cd "$(dirname "$0")/.."

tests=0 build=1
for a in "$@"; do
  case $a in
    --tests) tests=1 ;;
    --no-build) build=0 ;;
    *) echo "setup: unknown option $a (use --tests, --no-build)" >&2; exit 2 ;;
  esac
done

packages=(
  # build
  g++ cmake ninja-build pkg-config git
  # libraries (docs/dependencies.md says why each; GoogleTest is found at configure time)
  libyaml-cpp-dev nlohmann-json3-dev libsqlite3-dev libcli11-dev libspdlog-dev libfmt-dev
  libssl-dev libgtest-dev libgmock-dev libcpp-httplib-dev libeigen3-dev
  libprotobuf-dev protobuf-compiler libmuparser-dev
  # the digits example: PyTorch on CPU, sklearn's bundled digits data
  python3 python3-torch python3-sklearn
)
if ((tests)); then
  packages+=(
    # the debug preset: clang with AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer
    clang libclang-rt-14-dev
    # tests read the store with the sqlite3 shell; procps gives ps/pgrep for the no-orphans checks
    sqlite3 procps
    # promtool checks a live /metrics scrape in the tests (the package also brings the server)
    prometheus
    # the web UI's browser tests drive Debian's Chromium with playwright-core; a CJK font so their
    # screenshots show the recipes' Chinese aliases
    chromium fonts-wqy-microhei
  )
fi
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

# npm packages, pinned by their package-lock.json: uPlot, compiled into the web UI (web/); for the
# tests, the official MCP SDK client (tests/mcp/) and playwright-core (tests/web/).
npm_ci() {
  [[ -d $1/node_modules/$2 ]] || (cd "$1" && npm ci --no-audit --no-fund --loglevel=error)
}
npm_ci web uplot
if ((tests)); then
  npm_ci tests/mcp @modelcontextprotocol/sdk
  npm_ci tests/web playwright-core
fi

if ((build)); then
  cmake --preset default >/dev/null
  if ((tests)); then
    cmake --build --preset default
  else
    cmake --build --preset default --target drover
  fi
fi
