"""The scale-out harness (docs/sessions.md, "Many instances"): several gateway instances behind nginx round robin, stateful
replicated backends, and official-SDK clients of every era. `python -m bench.cluster` benchmarks it,
`make cluster` runs it by hand, tests/cluster runs it in CI."""
