"""Reciprocal Rank Fusion (pure)."""

from __future__ import annotations

from apps.retrieval.fusion import RRF_K, rrf


def test_a_candidate_both_paths_rank_beats_one_only_a_single_path_ranks_first() -> None:
    fused = rrf({"dense": ["a", "b", "c"], "text": ["d", "b", "e"]})
    assert [f.key for f in fused] == ["b", "a", "d", "c", "e"]
    b = fused[0]
    assert b.ranks == {"dense": 2, "text": 2}
    assert b.score == 2 / (RRF_K + 2)


def test_a_first_rank_in_one_path_beats_middling_ranks_in_both() -> None:
    # One path's first (1/31) against both paths' 40th (2/70): with the paper's k of 60 the
    # middling tool would win (1/61 < 2/100), and a paraphrase's dense-only answer would sink.
    middling = [f"m{i}" for i in range(39)]
    fused = rrf({"dense": ["first", *middling, "both"], "text": [*middling[::-1], "both"]})
    keys = [f.key for f in fused]
    assert keys.index("first") < keys.index("both")


def test_ties_are_broken_by_the_best_rank_then_by_the_key() -> None:
    # x and y have the same fused score (rank 1 in one path each); z and w too, at rank 2.
    fused = rrf({"dense": ["y", "w"], "text": ["x", "z"]})
    assert [f.key for f in fused] == ["x", "y", "w", "z"]
    assert rrf({"text": ["x", "z"], "dense": ["y", "w"]}) == fused


def test_empty_paths_fuse_to_nothing() -> None:
    assert rrf({"dense": [], "text": []}) == []
    assert [f.key for f in rrf({"dense": [], "text": ["only"]})] == ["only"]
