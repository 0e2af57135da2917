#!/bin/sh
# ctest's Mcp.OfficialSdk: the SDK and Inspector client tests (tests/mcp/*.test.mjs) with node's
# test runner. scripts/test.sh installs the pinned packages first (npm ci in tests/mcp and
# tests/mcp/inspector); run that here when they are missing.
set -eu
here=$(dirname "$0")
command -v node >/dev/null || { echo "node is missing: apt-get install nodejs npm" >&2; exit 1; }
[ -d "$here/node_modules/@modelcontextprotocol/sdk" ] ||
  { echo "the MCP SDK is not installed: npm ci --prefix $here (scripts/test.sh does it)" >&2; exit 1; }
[ -x "$here/inspector/node_modules/.bin/mcp-inspector" ] ||
  { echo "the MCP Inspector is not installed: npm ci --prefix $here/inspector (scripts/test.sh does it)" >&2; exit 1; }
exec node --test "$here"/*.test.mjs
