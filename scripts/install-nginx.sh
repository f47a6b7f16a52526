#!/usr/bin/env bash
# Installs Debian's nginx for the scale-out harness (bench/cluster, tests/cluster, `make cluster`):
# plain round robin in front of several gateway instances. The harness runs nginx as the current
# user with its own config and prefix under var/, never the package's nginx.service.
exec "$(dirname "$0")/install-debian-package.sh" nginx nginx "cluster tests"
