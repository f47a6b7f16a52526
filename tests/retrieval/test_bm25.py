"""The full-text ranking (apps/retrieval/bm25.py, pure): PostgreSQL's printed `tsvector`s read as
occurrences per field, and BM25F over them — rare words weigh more, names more than descriptions,
short texts more than long ones — within the candidates the picking words and the scope allow."""

from __future__ import annotations

from apps.retrieval.bm25 import TextIndex, tsvector_terms


def test_a_printed_tsvector_is_read_as_occurrences_per_weight() -> None:
    assert tsvector_terms("'group':1A,4C,9 'secur':2A,10 'o''brien':3B 'x'") == {
        "group": (1, 0, 1, 1), "secur": (1, 0, 0, 1), "o'brien": (0, 1, 0, 0), "x": (0, 0, 0, 1),
    }
    assert tsvector_terms("") == {}


def index(texts: dict[str, dict[str, tuple[int, int, int, int]]]) -> TextIndex[str]:
    return TextIndex(sorted(texts.items()))


D = (0, 0, 0, 1)  # once, in the description
A = (1, 0, 0, 0)  # once, in the name


def test_a_rare_word_outweighs_common_ones() -> None:
    # What ts_rank got wrong: "group" and "secur" are in every tool, "ingress" in one.
    texts = {f"Tool{n}": {"group": D, "secur": D} for n in range(30)}
    texts["AuthorizeIngress"] = {"ingress": D, "rule": D}
    ranked = index(texts).rank(["secur", "group", "ingress"], picking=["secur", "group", "ingress"], allowed=None,
                               depth=5)
    assert ranked[0][0] == "AuthorizeIngress"
    assert [key for key, _ in ranked[1:]] == ["Tool0", "Tool1", "Tool10", "Tool11"]  # equal scores: by key


def test_names_weigh_more_than_descriptions_and_short_texts_more_than_long() -> None:
    filler = {f"word{n}": D for n in range(40)}
    texts = {"InName": {"vpc": A, "other": D}, "InDescription": {"vpc": D, "other": D},
             "Long": {"vpc": A, **filler}, "Unrelated": {"other": D}}
    scores = dict(index(texts).rank(["vpc"], picking=["vpc"], allowed=None, depth=10))
    assert scores.keys() == {"InName", "InDescription", "Long"}
    assert scores["InName"] > scores["InDescription"]  # the same length: the name counts twice
    assert scores["InName"] > scores["Long"]  # the same occurrence, in a text twenty times as long


def test_only_picking_words_choose_candidates_and_the_scope_narrows_them() -> None:
    texts = {"A": {"common": D, "rare": D}, "B": {"common": D}, "C": {"rare": D}}
    text = index(texts)
    assert [k for k, _ in text.rank(["common", "rare"], picking=["rare"], allowed=None, depth=10)] == ["A", "C"]
    assert [k for k, _ in text.rank(["common", "rare"], picking=["rare"], allowed=text.mask(["C", "Z"]), depth=10)] \
        == ["C"]
    assert text.rank(["rare"], picking=["missing"], allowed=None, depth=10) == []
    assert len(text.rank(["common", "rare"], picking=["common", "rare"], allowed=None, depth=2)) == 2


def test_common_words_are_those_in_more_than_a_tenth_of_the_tools() -> None:
    texts = {f"T{n}": {"everywhere": D, f"own{n}": D} for n in range(20)}
    texts["T0"]["twice"] = D
    texts["T1"]["twice"] = D
    texts["T2"]["thrice"] = D
    texts["T3"]["thrice"] = D
    texts["T4"]["thrice"] = D
    assert index(texts).common == {"everywhere", "thrice"}  # 3 of 20 > 10 %; 2 of 20 is not
