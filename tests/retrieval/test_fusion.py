"""Fusing the paths' rankings: Reciprocal Rank Fusion, with each path's first few kept near the top (pure)."""

from __future__ import annotations

import random

from apps.retrieval.fusion import HEAD, PROTECTED, RRF_K, fuse, fuse_also, rrf


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


def test_alternatives_that_agree_elsewhere_do_not_push_out_the_query_s_first() -> None:
    # Three phrasings all put a crowd first that the query ranks low: each crowd tool scores more
    # than the query's first (3 × w/31 > 1/31) and, unprotected, all five would sit above it.
    crowd = ["c1", "c2", "c3", "c4", "c5"]
    query = ["top", "second", *[f"q{i}" for i in range(20)], *crowd]
    alternatives = [crowd + ["x"], crowd + ["y"], crowd + ["z"]]
    keys = [f.key for f in fuse_also(query, alternatives)]
    assert {"top", "second"} <= set(keys[:HEAD])
    assert set(keys[:HEAD]) & set(crowd)  # the alternatives still count


def test_an_alternative_counts_less_than_the_query() -> None:
    # The query ranks a first, the one alternative b: the query wins; at equal weight, the key would decide.
    assert [f.key for f in fuse_also(["a", "b"], [["b", "a"]])][:2] == ["a", "b"]
    assert [f.key for f in fuse_also(["b", "a"], [["a", "b"]])][:2] == ["b", "a"]
    assert fuse_also(["a"], [["b"]])[1].ranks == {"also1": 1}


def test_alternatives_never_change_which_keys_are_found_only_their_order() -> None:
    rng = random.Random(11)
    pool = [f"tool{i}" for i in range(60)]
    for _ in range(200):
        query = rng.sample(pool, rng.randint(1, 30))
        alternatives = [rng.sample(pool, rng.randint(0, 30)) for _ in range(rng.randint(1, 3))]
        fused = [f.key for f in fuse_also(query, alternatives)]
        assert sorted(fused) == sorted(set(query).union(*alternatives))
        assert set(query[:PROTECTED]) <= set(fused[:HEAD])
