#!/usr/bin/env bash
# Installs Debian's Chromium for the browser tests (driven by the playwright package from
# requirements/dev.txt; playwright never downloads a browser of its own here).
exec "$(dirname "$0")/install-debian-package.sh" chromium chromium "browser tests"
