"""The hybrid find plan's weights follow each list's evidence for the query (`ranking.evidence`):
a Chinese instruction against English documents is proposed by keyword only Chinese documents
sharing a word or two with it, and that list must not outweigh the vector list's nearest
document; and find_processes' own default weights (keyword 1 : vector 1.5) are not recall's.
Through `find_processes` with the real default model, on documents of our own evaluation
(eval/generate.py), and on hand-made candidates."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.processes.docmodel import reliability
from robot_mcp_memory.processes.ranking import (
    CORROBORATION_FLOOR,
    Candidates,
    Fusion,
    corroborated,
    evidence,
    evidence_weights,
    rank_hybrid,
)
from robot_mcp_memory.search import relevance, segment
from robot_mcp_memory.search.relevance import KeywordBound
from robot_mcp_memory.tenancy.principal import STDIO
from tests.conftest import doc


def _stack(count: str) -> str:
    return doc(
        f"stack-{count}-red-tray",
        f"Stack {count} red cubes on the tray",
        f"## Steps\n1. find_object(red cube) x {count}\n2. place each on the tray\n3. check the tower is straight",
        task_pattern=f"stack {count} red cubes tray",
        tags="[stack, cube, red]",
    )


CORPUS = [
    _stack("one"),
    _stack("two"),
    _stack("three"),
    doc(
        "pick-red-cube-table-kitchen",
        "Pick up the red cube from the table in the kitchen",
        "## Steps\n1. navigate_to(kitchen table)\n2. find_object(red cube)\n3. grasp from above",
        task_pattern="pick up red cube table",
        tags="[pick, cube, red, kitchen]",
    ),
    # Chinese, sharing 托盘 (tray) and 红色 (red) with the queries below: the keyword list's
    # only proposal for them, and a document of another task.
    doc(
        "pick-red-ball-tray-lab-zh",
        "从实验室的托盘上拿起红色的球",
        "## Steps\n1. navigate_to(实验室 托盘)\n2. find_object(红色 球)\n3. grasp from above",
        task_pattern="从实验室的托盘上拿起红色的球",
        tags="[pick, ball, red, lab]",
    ),
]


async def _opened(tmp_path: Path, **env: str) -> Memory:
    # The default model, loaded once per test process and shared (`USEEmbedder._shared`).
    m = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path / "data"), "ROBOT_ID": "tester", **env}))
    try:
        assert m.embedder is not None
        assert m.embedder.wait_ready(120), m.embedder.status()
        for text in CORPUS:
            await m.processes.save(STDIO, text)
    except BaseException:
        m.close()
        raise
    return m


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[Memory]:
    m = await _opened(tmp_path)
    try:
        yield m
    finally:
        m.close()


@pytest.mark.parametrize(
    ("query", "expect"),
    [
        ("用两个红色方块在托盘上搭塔", "stack-two-red-tray"),  # build a tower of two red cubes on the tray
        ("用三个红色方块在托盘上搭塔", "stack-three-red-tray"),  # the same, of three
        ("拿起厨房桌子上那个红色的方块", "pick-red-cube-table-kitchen"),  # pick up the red cube on the kitchen table
    ],
)
async def test_a_chinese_instruction_finds_its_english_document_over_a_chinese_one_sharing_two_words(
    memory: Memory, query: str, expect: str
) -> None:
    found = await memory.processes.find(STDIO, query, k=3)
    assert found.mode == "hybrid"
    assert found.hits[0].doc.id == expect
    assert all(0.0 <= h.relevance <= 1.0 for h in found.hits)


QUERY_TWO = "在托盘上摞两个红色的方块"  # pile two red cubes on the tray


@pytest.mark.parametrize("weights", [None, "keyword:1,vector:1"], ids=["default", "recall-s-1-1"])
async def test_find_processes_weighs_the_vector_list_more_than_experience_recall_does(
    tmp_path: Path, weights: str | None
) -> None:
    # The processes' own default weights (MEMORY_PROCESS_FUSION_WEIGHTS unset) are keyword 1 :
    # vector 1.5, not recall's 1:1. Recall's 1:1 missed this English target for the Chinese
    # document sharing 托盘 and 红色 until the cross-script guard (`Fusion.cross_script`):
    # now both weights find it.
    env = {} if weights is None else {"MEMORY_PROCESS_FUSION_WEIGHTS": weights}
    assert Settings.from_env(env).process_fusion_weights == ((1.0, 1.5) if weights is None else (1.0, 1.0))
    memory = await _opened(tmp_path, **env)
    try:
        assert (await memory.processes.find(STDIO, QUERY_TWO, k=3)).hits[0].doc.id == "stack-two-red-tray"
    finally:
        memory.close()


# ---------------------------------------------------------------------------- on hand-made candidates
NEUTRAL = reliability(0, 0)
BOUND = KeywordBound(most=10.0, coverage=1.0)  # keyword relevance = raw / 10


def _cross_lingual() -> Candidates:
    # "shares-a-word" holds a small part of the query (keyword 0.15) and is fairly close
    # (vector 0.5); "target" is the nearest document (vector 0.6) and holds none of its words.
    return Candidates(
        keyword=[("shares-a-word", 1.5)],
        vector=[("target", 0.2 + 0.8 * 0.6), ("shares-a-word", 0.2 + 0.8 * 0.5)],
        reliability={"target": NEUTRAL, "shares-a-word": NEUTRAL},
        bound=BOUND,
    )


def test_a_keyword_list_holding_little_of_the_query_weighs_little() -> None:
    c = _cross_lingual()
    assert evidence(c) == pytest.approx((0.15, 0.6))
    assert evidence_weights(c, (1.0, 1.0)) == pytest.approx((0.15, 0.6))
    scaled = rank_hybrid(c, Fusion(), 2)
    assert [h.ref for h in scaled] == ["target", "shares-a-word"]
    assert scaled[0].relevance == pytest.approx(0.6 * 0.6 / 0.75)
    # With the weights as set, half a weak keyword match outweighs the vector list's nearest.
    assert [h.ref for h in rank_hybrid(c, Fusion(evidence=False), 2)] == ["shares-a-word", "target"]


def test_evidence_scales_the_weights_as_set_not_instead_of_them() -> None:
    c = _cross_lingual()
    assert evidence_weights(c, (1.0, 2.0)) == pytest.approx((0.15, 1.2))
    assert evidence_weights(c, (0.0, 1.0)) == pytest.approx((0.0, 0.6))


def test_an_exact_match_high_in_both_lists_keeps_its_relevance_within_0_1() -> None:
    c = Candidates(
        keyword=[("exact", 8.5), ("partial", 2.0)],
        vector=[("exact", 0.2 + 0.8 * 0.9), ("partial", 0.2 + 0.8 * 0.4)],
        reliability={"exact": NEUTRAL, "partial": NEUTRAL},
        bound=BOUND,
    )
    ranked = rank_hybrid(c, Fusion(), 2)
    assert [h.ref for h in ranked] == ["exact", "partial"]
    # weights 0.85 : 0.9, so the exact match's relevance lies between its two, 0.85 and 0.9
    assert 0.85 < ranked[0].relevance < 0.9
    assert all(0.0 <= h.relevance <= 1.0 for h in ranked)


def test_a_list_that_proposes_nothing_drops_out_and_the_other_s_relevance_is_the_hybrid_one() -> None:
    c = Candidates(
        keyword=[],
        vector=[("near", 0.2 + 0.8 * 0.7), ("far", 0.2 + 0.8 * 0.3)],
        reliability={"near": NEUTRAL, "far": NEUTRAL},
        bound=relevance.NO_MATCH,
    )
    assert evidence(c) == pytest.approx((0.0, 0.7))
    assert [(h.ref, round(h.relevance, 9)) for h in rank_hybrid(c, Fusion(), 2)] == [("near", 0.7), ("far", 0.3)]
    # Unscaled, every relevance was half its vector relevance: the keyword weight still counted.
    assert [round(h.relevance, 9) for h in rank_hybrid(c, Fusion(evidence=False), 2)] == [0.35, 0.15]


def _strong_chinese_distractor(blind: frozenset[str]) -> Candidates:
    # A Chinese document holding most of a Chinese query (keyword 0.6, vector 0.55) and the
    # English target the keyword leg cannot see (vector 0.6): the generated sets' zh→en misses.
    return Candidates(
        keyword=[("zh-distractor", 6.0)],
        vector=[("en-target", 0.2 + 0.8 * 0.6), ("zh-distractor", 0.2 + 0.8 * 0.55)],
        reliability={"en-target": NEUTRAL, "zh-distractor": NEUTRAL},
        bound=BOUND,
        blind=blind,
    )


def test_a_document_in_no_script_of_the_query_is_ranked_by_its_vector_relevance_alone() -> None:
    c = _strong_chinese_distractor(frozenset({"en-target"}))
    ranked = rank_hybrid(c, Fusion(), 2)
    # the distractor: keyword 0.6, corroborated × 0.55 / 0.6 by the vectors (`corroborated`), and
    # vector 0.55, averaged by the evidence weights 0.6 : 0.9
    assert [(h.ref, round(h.relevance, 9)) for h in ranked] == [("en-target", 0.6), ("zh-distractor", 0.55)]
    # Without the guard its keyword 0 counts against it, as if it lacked the query's words.
    assert [h.ref for h in rank_hybrid(c, Fusion(cross_script=0.0), 2)] == ["zh-distractor", "en-target"]
    # A candidate the keyword leg could have matched keeps its keyword 0.
    assert rank_hybrid(_strong_chinese_distractor(frozenset()), Fusion(), 2)[0].ref == "zh-distractor"


@pytest.mark.parametrize(
    ("text", "scripts"),
    [
        ("Stack two red cubes", {"latin"}),
        ("用两个红色方块搭塔", {"cjk"}),
        ("拿起 M3 螺丝", {"cjk", "latin"}),
        ("Déposer la tasse", {"latin"}),
        ("… — !", set()),
    ],
)
def test_scripts_say_what_keyword_search_can_match_a_text_by(text: str, scripts: set[str]) -> None:
    assert segment.scripts(text) == scripts


def _one_shared_word() -> Candidates:
    # "play basketball": "Play music on the speaker" holds "play" (keyword 0.45) but is far
    # from the query by vector (0.10); "Put the ball through the hoop" holds no word of it and
    # is the vectors' first (0.33): the dev set's paraphrase-games miss.
    return Candidates(
        keyword=[("play-music", 4.5)],
        vector=[("ball-hoop", 0.2 + 0.8 * 0.33), ("play-music", 0.2 + 0.8 * 0.10)],
        reliability={"ball-hoop": NEUTRAL, "play-music": NEUTRAL},
        bound=BOUND,
    )


def test_a_keyword_match_the_vectors_place_far_below_their_first_counts_for_less() -> None:
    c = _one_shared_word()
    assert [h.ref for h in rank_hybrid(c, Fusion((1.0, 1.5)), 2)] == ["ball-hoop", "play-music"]
    assert [h.ref for h in rank_hybrid(c, Fusion((1.0, 1.5), corroborate=False), 2)] == ["play-music", "ball-hoop"]


def test_corroboration_keeps_the_vectors_first_whole_and_never_drops_a_keyword_match() -> None:
    keyword = {"exact": 0.9, "code": 0.8}
    cosine = {"exact": 0.2 + 0.8 * 0.7, "other": 0.2 + 0.8 * 0.5, "code": 0.1}  # "code": below the floor
    got = corroborated(keyword, cosine)
    assert got["exact"] == pytest.approx(0.9)  # the vectors' first: unchanged
    assert got["code"] == pytest.approx(0.8 * CORROBORATION_FLOOR)  # a fifth at least, still a match
    assert corroborated(keyword, {}) == keyword  # no vector evidence: unchanged


def test_a_keyword_match_without_a_vector_keeps_its_keyword_relevance() -> None:
    """An edited document has no vector until the backfill runs: the vectors say nothing of
    it, which is not "far"; an exact keyword match must not lose to a weak vector neighbour."""
    c = Candidates(
        keyword=[("exact-no-vector", 9.0)],
        vector=[("weak", 0.2 + 0.8 * 0.3)],
        reliability={"exact-no-vector": NEUTRAL, "weak": NEUTRAL},
        bound=BOUND,
    )
    assert rank_hybrid(c, Fusion((1.0, 1.5)), 2)[0].ref == "exact-no-vector"
    assert corroborated({"a": 0.5, "b": 0.5}, {"a": 0.9, "b": float("nan")}) == {"a": 0.5, "b": 0.5}
    assert corroborated({"a": 0.5, "b": 0.5}, {"n": float("nan"), "a": 0.9, "b": 0.3})["b"] < 0.5  # NaN ignored
