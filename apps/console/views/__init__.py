"""The console's pages, one module per area. Each module ends with `urls`: its URL patterns under
`/console/t/<tenant>/` (or `platform_urls` under `/console/`), which apps/console/urls.py mounts."""
