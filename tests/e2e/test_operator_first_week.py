"""Issue 30 #2 and #3 against the real server process.

- Rows saved on a trial setup (no tokens, no ``ROBOT_ID``: robot ``unknown``) are invisible to a
  robot token once tokens are on; the start says so, and the dashboard's Health page hands them to
  ``shared`` (count, confirm, hand over) in the real headless Chromium.
- ``index.db`` damaged under the running server: ``/readyz`` fails naming the file and the next
  step, ``/healthz`` stays ok, and a tool's refusal names the next step without a path or SQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Dialog, expect

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.tenancy.principal import OPEN
from tests.conftest import MAILROOM
from tests.e2e.harness import ServerProcess, http_session, json_lines
from tests.e2e.test_dashboard import browser, login, open_page  # noqa: F401 -- `browser` is a fixture used here
from tests.operations.test_readiness import LEAKS, damage

pytestmark = pytest.mark.e2e

ADMIN = "admin-e2e-token-1234"
RAP1 = "rap1-e2e-token-1234"
TRIAL_DOC = MAILROOM.replace("robot: g1-lab-01\n", "")  # saved without a robot: provenance 'unknown'


async def trial(data_dir: Path) -> None:
    """What a trial without tokens and without ROBOT_ID leaves: a document and a memory of 'unknown'."""
    memory = Memory.open(Settings.from_env({"MEMORY_DATA_DIR": str(data_dir), "MEMORY_EMBEDDER": "hashing"}))
    try:
        saved = await memory.processes.save(OPEN, TRIAL_DOC)
        assert saved.doc.robot == "unknown"
        await memory.experiences.learn(OPEN, "the mailroom door sticks; push it hard")
    finally:
        memory.close()


@pytest.fixture
async def tokened(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    await trial(tmp_path / "data")
    env = {"MEMORY_TOKEN": ADMIN, "MEMORY_ROBOT_TOKENS": f"rap-1:{RAP1}", "MEMORY_EMBEDDER": "hashing"}
    proc = ServerProcess(data_dir=tmp_path / "data", log_dir=tmp_path, env=env)
    await proc.start()
    try:
        yield proc
    finally:
        await proc.stop()


async def robot_total(server: ServerProcess) -> int:
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {RAP1}"}, timeout=10) as c:
        r = await c.get(server.url("/api/processes"))
        assert r.status_code == 200, r.text
        total: int = r.json()["total"]
        return total


async def test_the_health_page_hands_rows_saved_before_tokens_to_shared(
    tokened: ServerProcess,
    browser: Browser,  # noqa: F811 -- the imported fixture
) -> None:
    hints = [e for e in json_lines(tokened.stderr()) if e.get("event") == "provenance.unknown"]
    assert len(hints) == 1, tokened.stderr()
    assert (hints[0]["processes"], hints[0]["memories"]) == (1, 1)
    assert await robot_total(tokened) == 0  # the finding: a robot sees nothing

    page = await open_page(browser)
    dialogs: list[str] = []

    async def accept(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        await dialog.accept()

    page.on("dialog", accept)
    await login(page, tokened, ADMIN)
    await page.goto(tokened.url("/#/health"))
    await expect(page.locator("#hand-over-to")).to_have_value("shared")
    await page.click("#hand-over button[type=submit]")
    await expect(page.locator("#hand-over-result")).to_contain_text("Handed 1 processes, 1 memories")
    assert dialogs == ['Hand 1 processes, 1 memories, 0 sessions from "unknown" to "shared"?']
    assert await robot_total(tokened) == 1


async def test_a_damaged_index_fails_readiness_and_every_refusal_names_the_next_step(tmp_path: Path) -> None:
    proc = ServerProcess(data_dir=tmp_path / "data", log_dir=tmp_path, env={"MEMORY_EMBEDDER": "hashing"})
    await proc.start()
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(proc.url("/readyz"))).status_code == 200
            async with http_session(proc) as client:
                assert "id" in await client.call("save_process", markdown=MAILROOM)
                damage(proc.index_path)
                refused = await client.call("find_processes", query="bring me the parcel from the mail room")
            assert (await http.get(proc.url("/healthz"))).status_code == 200
            ready = await http.get(proc.url("/readyz"))
            rest = await http.get(proc.url("/api/processes"))
    finally:
        await proc.stop()
    assert ready.status_code == 503, ready.text
    assert ready.json()["failed"] == ["index.db"]
    assert "robot-mcp-memory doctor" in ready.json()["next_step"]
    assert refused["error"] == "storage", refused
    assert "robot-mcp-memory doctor" in refused["detail"]
    assert rest.status_code == 503
    assert "robot-mcp-memory doctor" in rest.json()["detail"]
    for text in (ready.text, str(refused), rest.text):
        for leak in (*LEAKS, str(tmp_path)):
            assert leak not in text, text
