"""The image's HEALTHCHECK: `python docker/healthcheck.py PORT` exits 0 when the gateway in this
container answers GET /healthz on PORT, 1 otherwise (with the reason on stderr).

/healthz answers under any `Host` (apps/common/probe_hosts.py), so 127.0.0.1 will do. The probe says
the request came over HTTPS (X-Forwarded-Proto, as the TLS-terminating proxy would), so that a
production SECURE_SSL_REDIRECT could never answer it with a redirect. Standard library only: it runs
every few seconds and must start fast."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: healthcheck.py PORT", file=sys.stderr)
        return 2
    url = f"http://127.0.0.1:{argv[1]}/healthz"
    request = urllib.request.Request(url, headers={"X-Forwarded-Proto": "https"})
    try:
        with urllib.request.urlopen(request, timeout=4) as response:  # noqa: S310 - fixed http URL
            status = response.status
    except (urllib.error.URLError, OSError) as exc:
        print(f"healthcheck: GET {url} failed: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"healthcheck: GET {url} answered {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
