#!/usr/bin/env bash
# The official MCP TypeScript SDK client against drover, over stdio (`drover mcp`, which starts a
# daemon) and over streamable HTTP (a daemon's /mcp). Needs `npm ci` here (scripts/setup.sh runs
# it). Conversation logs are kept in $LOG_DIR (default: a temp folder, printed).
#   tests/mcp/run.sh DROVER_BIN
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
drover="$(realpath "${1:?usage: run.sh DROVER_BIN}")"
digits="$(realpath "$here/../../examples/digits")"
[[ -d "$here/node_modules/@modelcontextprotocol/sdk" ]] || { echo "run npm ci in $here first (scripts/setup.sh does)" >&2; exit 1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/drover-mcp-sdk.XXXXXX")"
logs="${LOG_DIR:-$work/logs}"
mkdir -p "$logs"
stop_daemon() {
  local store="$1"
  [[ -f "$store/daemon.json" ]] || return 0
  local pid
  pid=$(sed -E 's/.*"pid":([0-9]+).*/\1/' "$store/daemon.json")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
}
cleanup() {
  stop_daemon "$work/stdio-store"; stop_daemon "$work/http-store"; stop_daemon "$work/agent-store"
  stop_daemon "$work/search-store"
}
trap cleanup EXIT

node "$here/sdk_client.mjs" stdio "$drover" "$work/stdio-store" "$digits" "$logs/stdio.jsonl"
node "$here/agent_loop.mjs" "$drover" "$work/agent-store" "$digits" "$logs/agent-loop.jsonl"
node "$here/search_agent.mjs" "$drover" "$work/search-store" "$logs/search-agent.jsonl"

"$drover" serve --store "$work/http-store" --listen 127.0.0.1:0 --fake-gpus 2x16GiB \
  >"$logs/serve.out" 2>&1 &
for _ in $(seq 200); do [[ -s "$work/http-store/daemon.json" ]] && break; sleep 0.05; done
port=$(sed -E 's/.*"port":([0-9]+).*/\1/' "$work/http-store/daemon.json")
token=$(cat "$work/http-store/token")
node "$here/sdk_client.mjs" http "http://127.0.0.1:$port/mcp" "$token" "$digits" "$logs/http.jsonl"

# The official conformance suite, the scenarios that apply to a server offering tools only
# (docs/mcp.md says why the others do not). It cannot send headers: the token rides in the URL.
for scenario in server-initialize ping tools-list server-sse-multiple-streams dns-rebinding-protection; do
  "$here/node_modules/.bin/conformance" server --url "http://127.0.0.1:$port/mcp?token=$token" \
    --scenario "$scenario" -o "$logs/conformance" >"$logs/conformance-$scenario.txt" 2>&1 || {
    cat "$logs/conformance-$scenario.txt" >&2
    echo "conformance scenario $scenario failed" >&2
    exit 1
  }
  grep -qE "Passed: ([0-9]+)/\1, 0 failed" "$logs/conformance-$scenario.txt" || {
    cat "$logs/conformance-$scenario.txt" >&2
    exit 1
  }
  echo "conformance: $scenario passed"
done
echo "conversation logs: $logs"
