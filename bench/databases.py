"""Databases of their own for the benchmarks that build big data sets (console pages, audit at
volume, snapshots at many tenants): on the server `BENCH_POSTGRES` names (default: `make
services`' PostgreSQL), so the development and test databases stay as they are."""

from __future__ import annotations

import os

import psycopg

SERVER = os.environ.get("BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:55432")


def bench_database(name: str, *, fresh: bool = False) -> str:
    """The URL of database `name` on the benchmarks' server, created if missing (dropped and made
    again when `fresh`). Call before Django is set up, and point DATABASE_URL at it."""
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None
        if exists and fresh:
            connection.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        if fresh or not exists:
            connection.execute(f'CREATE DATABASE "{name}"')
    return f"{SERVER}/{name}"
