"""The scale-out harness (issue 7): several gateway instances behind nginx round robin, stateful
replicated backends, and official-SDK clients of every era. `python -m bench.cluster` benchmarks it,
`make cluster` runs it by hand, tests/cluster runs it in CI."""
