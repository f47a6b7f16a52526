"""Fusing the paths' rankings: Reciprocal Rank Fusion, with each path's first few kept near the top (pure)."""

from __future__ import annotations

import random

from apps.retrieval.fusion import HEAD, PROTECTED, RRF_K, fuse, rrf


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


def test_a_tool_one_path_ranks_second_is_not_buried_by_tools_both_paths_rank_mid_list() -> None:
    # The dense path ranks the answer 2nd and full text misses it (no word in common); a crowd of
    # tools both paths rank 3rd to 20th sit above it in plain RRF (2/(30+20) > 1/32).
    crowd = [f"crowd{i}" for i in range(18)]
    rankings = {"dense": ["d1", "answer", *crowd], "text": ["t1", "t2", *crowd[::-1]]}
    assert [f.key for f in rrf(rankings)].index("answer") >= HEAD  # what fusion used to do
    keys = [f.key for f in fuse(rankings)]
    assert keys.index("answer") < HEAD
    assert {"d1", "t1", "t2"} <= set(keys[:HEAD])


def test_fusion_keeps_every_path_first_few_in_the_head_and_otherwise_ranks_as_rrf() -> None:
    rng = random.Random(7)
    pool = [f"tool{i}" for i in range(80)]
    for _ in range(300):
        rankings = {path: rng.sample(pool, rng.randint(0, 40)) for path in ("dense", "text", "rewrite")}
        fused, plain = fuse(rankings), rrf(rankings)
        assert sorted(f.key for f in fused) == sorted(f.key for f in plain)
        assert {f.key: f for f in fused} == {f.key: f for f in plain}  # scores and ranks as RRF gives them
        protected = {key for keys in rankings.values() for key in keys[:PROTECTED]}
        head = max(HEAD, len(protected))
        assert protected <= {f.key for f in fused[:head]}
        order = [f.key for f in plain]
        for part in (fused[:HEAD], fused[head:]):  # each part in RRF's order
            assert [f.key for f in part] == sorted((f.key for f in part), key=order.index)
        if protected <= {f.key for f in plain[:HEAD]}:
            assert fused == plain  # nothing to move: RRF's answer
