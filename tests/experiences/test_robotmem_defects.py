"""One regression test per robotmem 0.1.3 defect (DESIGN §9) that applies to the experience memory."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest

from robot_mcp_memory.api import RobotMemory
from robot_mcp_memory.app import Memory
from robot_mcp_memory.tenancy.principal import STDIO
from tests.conftest import Client
from tests.experiences.conftest import age

CTX = {"params": {"grip_force": 12.5}, "spatial": {"position": [0.4, 0.1, 0.9]}, "task": {"success": True}}


# ---------------------------------------------------------------------------- §9.2 structured arguments over MCP
@pytest.mark.parametrize("as_string", [False, True], ids=["object", "json-string"])
async def test_structured_arguments_work_over_mcp_as_objects_and_as_json_strings(
    client: Client, as_string: bool
) -> None:
    def arg(value: dict[str, Any]) -> Any:
        return json.dumps(value) if as_string else value

    s = await client.call("start_session", context=arg({"task": {"name": "grasp_mug"}}))
    assert s["context"] == {"task": {"name": "grasp_mug"}}
    learned = await client.call(
        "learn", insight="grip force 12.5 N held the mug", context=arg(CTX), session_id=s["session_id"]
    )
    assert learned["status"] == "created"
    seen = await client.call(
        "save_perception",
        description="mug seen on the table",
        data=arg({"bbox": [10, 20, 30, 40]}),
        metadata=arg({"spatial": {"position": [0.5, 0.1, 0.9]}, "sensor": "wrist_cam"}),
    )
    assert seen["has_data"] is True
    found = await client.call(
        "recall",
        query="mug",
        context_filter=arg({"task.success": True, "params.grip_force": {"$gte": 10}}),
        spatial_sort=arg({"field": "spatial.position", "target": [0.4, 0.1, 0.9], "max_distance": 0.5}),
    )
    assert [m["id"] for m in found["memories"]] == [learned["memory_id"]]
    assert found["memories"][0]["params"] == {"grip_force": 12.5}
    assert found["memories"][0]["distance"] == 0.0
    perceived = await client.call("recall", query="table", context_filter=arg({"sensor": "wrist_cam"}))
    assert [m["id"] for m in perceived["memories"]] == [seen["memory_id"]]


async def test_a_plain_text_context_is_kept_as_a_note(client: Client) -> None:
    learned = await client.call("learn", insight="the lab is dark at night", context="observed during the night shift")
    got = await client.call("recall", query="lab dark")
    assert got["memories"][0]["id"] == learned["memory_id"]
    assert got["memories"][0]["context"] == {"note": "observed during the night shift"}


# ---------------------------------------------------------------------------- §9.4 compounding decay
async def test_ending_ten_sessions_does_not_change_a_memorys_confidence(client: Client, memory: Memory) -> None:
    learned = await client.call("learn", insight="the drawer sticks when it is humid")
    age(memory, learned["memory_id"], 10)  # robotmem: 0.80 → 0.29 after 10 end_sessions at this age
    first = (await client.call("recall", query="drawer"))["memories"][0]
    for _ in range(10):
        s = await client.call("start_session")
        await client.call("end_session", session_id=s["session_id"], outcome_score=1.0)
    again = (await client.call("recall", query="drawer"))["memories"][0]
    assert again["base_confidence"] == first["base_confidence"] == 0.8
    assert again["confidence"] == pytest.approx(first["confidence"], abs=1e-6)
    assert again["confidence"] > 0.7  # ten days of read-time decay, once


# ---------------------------------------------------------------------------- §9.5 dedup and consolidation by text only
async def test_the_same_sentence_with_different_parameters_or_outcome_is_a_new_memory(client: Client) -> None:
    text = "grasp the mug by the handle"
    a = await client.call("learn", insight=text, context={"params": {"grip_force": 12}, "task": {"success": True}})
    same = await client.call("learn", insight=text, context={"params": {"grip_force": 12}, "task": {"success": True}})
    other_force = await client.call(
        "learn", insight=text, context={"params": {"grip_force": 15}, "task": {"success": True}}
    )
    failed = await client.call(
        "learn", insight=text, context={"params": {"grip_force": 12}, "task": {"success": False}}
    )
    assert a["status"] == "created"
    assert same == {**same, "status": "duplicate", "existing_id": a["memory_id"], "method": "exact"}
    assert other_force["status"] == failed["status"] == "created"
    assert len({a["memory_id"], other_force["memory_id"], failed["memory_id"]}) == 3


async def test_numbers_in_the_text_decide_and_a_rephrasing_is_a_duplicate(client: Client) -> None:
    a = await client.call("learn", insight="Grip the wet mug with 12 N of force.")
    b = await client.call("learn", insight="grip the wet mug with 15 N of force")
    c = await client.call("learn", insight="Please grip the wet mug with 12N of force")
    assert b["status"] == "created"
    assert c["status"] == "duplicate"
    assert c["existing_id"] == a["memory_id"]
    assert c["method"] == "jaccard"


async def test_a_negated_instruction_is_not_a_duplicate_of_the_positive_one(client: Client) -> None:
    pos = await client.call("learn", insight="grasp the mug by the rim when it is hot")
    neg = await client.call("learn", insight="do not grasp the mug by the rim")
    assert neg["status"] == "created"
    assert neg["memory_id"] != pos["memory_id"]


async def test_a_repeated_perception_with_new_data_is_stored_not_an_error(client: Client) -> None:
    a = await client.call("save_perception", description="red mug on the table", data={"bbox": [1, 2, 3, 4]})
    b = await client.call("save_perception", description="red mug on the table", data={"bbox": [5, 6, 7, 8]})
    c = await client.call("save_perception", description="red mug on the table", data={"bbox": [5, 6, 7, 8]})
    assert a["status"] == b["status"] == "created"
    assert a["memory_id"] != b["memory_id"]
    assert c["status"] == "duplicate"
    assert c["memory_id"] == b["memory_id"]


async def test_consolidation_never_merges_a_failure_into_a_success(client: Client) -> None:
    s = (await client.call("start_session"))["session_id"]
    ok = {"task": {"success": True}}
    bad = {"task": {"success": False}}
    first = "approach the shelf from the left because the cart blocks the right"
    texts = (first, "approach the shelf slowly from the left because the cart blocks the right")
    wins = [await client.call("learn", insight=text, context=ok, session_id=s) for text in texts]
    # corrected into a lexical duplicate of the first, which learn would have caught
    up = await client.call("update", memory_id=wins[1]["memory_id"], new_content=f"Please: {first}.", context=ok)
    assert "error" not in up
    await client.call("learn", insight="go round the cart", context=ok, session_id=s)
    loss = await client.call("learn", insight=first, context=bad, session_id=s)  # same words, other outcome
    assert loss["status"] == "created"
    assert loss["auto_inferred"]["category"] == "root_cause"
    ended = await client.call("end_session", session_id=s, outcome_score=0.5)
    superseded = ended["consolidated"]["superseded"]
    a, b = wins[0]["memory_id"], wins[1]["memory_id"]
    assert superseded in ([{"id": a, "by": b}], [{"id": b, "by": a}])
    left = await client.call("recall", query="approach shelf left", n=10)
    assert loss["memory_id"] in [m["id"] for m in left["memories"]]


# ---------------------------------------------------------------------------- §9.6 filters and operators
@pytest.mark.parametrize("op", ["$regex", "$where", "$foo", "$or"])
async def test_an_unknown_operator_is_an_invalid_argument_not_a_pass_everything(client: Client, op: str) -> None:
    await client.call("learn", insight="mug on the shelf")
    spec = {"$or": [{"task.success": True}]} if op == "$or" else {"task.success": {op: True}}
    out = await client.call("recall", query="mug", context_filter=spec)
    assert out["error"] == "invalid"
    assert op in out["detail"]


async def test_a_filter_applies_before_ranking_so_a_weak_text_match_is_still_found(
    client: Client, memory: Memory
) -> None:
    strong = [(f"grasp the mug, grasp the mug handle, mug mug {i}", {"task": {"success": False}}) for i in range(60)]
    await memory.experiences.learn_many(STDIO, strong)
    weak = await client.call("learn", insight="a mug", context={"task": {"success": True}})
    out = await client.call("recall", query="grasp the mug handle", n=1, context_filter={"task.success": True})
    assert [m["id"] for m in out["memories"]] == [weak["memory_id"]]


# ---------------------------------------------------------------------------- §9.7 non-Latin scripts
@pytest.mark.parametrize(
    ("insight", "query"),
    [
        ("机器人抓取杯子时应该用力十二牛顿", "抓取杯子"),
        ("Захват кружки за ручку работает лучше", "кружки"),
        ("Le café renversé rend le sol glissant", "cafe glissant"),
        ("マグカップを取っ手でつかむ", "マグカップ"),
        ("컵을 손잡이로 잡으세요", "손잡이"),
    ],
    ids=["chinese", "cyrillic", "accented", "kana", "hangul"],
)
async def test_every_script_is_recallable(client: Client, insight: str, query: str) -> None:
    await client.call("learn", insight="an unrelated note in English about doors")
    learned = await client.call("learn", insight=insight)
    found = await client.call("recall", query=query)
    assert [m["id"] for m in found["memories"]] == [learned["memory_id"]]


# ---------------------------------------------------------------------------- §9.9 the read path writes nothing
def test_recall_writes_nothing_and_never_waits_for_the_writer(memory: Memory) -> None:
    mem = RobotMemory.attach(memory)
    learned = mem.learn("the conveyor stops when the light curtain is crossed")
    held, release = threading.Event(), threading.Event()

    def hold_the_writer(_: object) -> None:
        held.set()
        release.wait(10)

    memory.index.hot(hold_the_writer)
    assert held.wait(5)
    statements: list[str] = []
    memory.index.read_blocking(lambda c: c.set_trace_callback(statements.append))
    before = memory.index.read_blocking(lambda c: c.total_changes)
    try:
        found = mem.recall("conveyor light curtain")  # completes while every write is stuck behind the writer
        after = memory.index.read_blocking(lambda c: c.total_changes)
    finally:
        release.set()
        memory.index.read_blocking(lambda c: c.set_trace_callback(None))
    assert [m["id"] for m in found] == [learned["memory_id"]]
    assert after == before
    assert statements
    assert not [s for s in statements if re.match(r"\s*(INSERT|UPDATE|DELETE|REPLACE)", s, re.I)]
    memory.experience_store.access.flush()
    memory.index.flush()
    assert mem.get(learned["memory_id"])["access_count"] == 1  # counted later, on the hot path


# ---------------------------------------------------------------------------- §9.10 bounded blobs
async def test_blobs_are_bounded_and_returned_only_when_asked(client: Client) -> None:
    too_big = await client.call("save_perception", description="lidar sweep", data={"points": "x" * 300_000})
    assert too_big["error"] == "invalid"
    ok = await client.call("save_perception", description="lidar sweep", data={"points": [1.5] * 1000})
    plain = (await client.call("recall", query="lidar"))["memories"][0]
    assert plain["id"] == ok["memory_id"]
    assert plain["has_data"] is True
    assert plain["data"] is None
    full = (await client.call("recall", query="lidar", include_data=True))["memories"][0]
    assert full["data"] == {"points": [1.5] * 1000}
