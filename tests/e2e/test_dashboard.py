"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright against the
real server process (MCP + REST + dashboard on one port), with tokens configured.

Screenshots of the main pages land in ``test-artifacts/screenshots/`` (gitignored; CI keeps them
as artifacts). Chromium is never downloaded by Playwright: scripts/check installs Debian's package
when it is missing; these tests skip, saying why, only when ``/usr/bin/chromium`` is absent.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from robot_mcp_memory.app import Memory
from robot_mcp_memory.config import Settings
from robot_mcp_memory.tenancy.principal import ADMIN as ADMIN_PRINCIPAL
from robot_mcp_memory.tenancy.principal import Principal
from tests.e2e.harness import ServerProcess, robot_tokens

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ADMIN = "admin-e2e-token-1234"
ROBOT_TOKENS = {"rap-1": "rap1-e2e-token-1234", "rap-9": "rap9-e2e-token-1234"}
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
TIMEOUT_MS = 10_000

XSS_BODY = (
    "## Steps\n1. open the door <script>window.__pwned = 1</script>\n"
    '2. <img src=x onerror="window.__pwned = 2"> then **grasp** the handle\n'
)


def process(pid: str, title: str, robot: str, body: str = "## Steps\n1. go\n", extra: str = "") -> str:
    return f"---\nid: {pid}\ntitle: {title}\nrobot: {robot}\n{extra}---\n\n{body}"


async def seed(server: ServerProcess) -> None:
    """Two groups, three robots, processes with outcomes — and one carrying a stored script."""
    headers = {"authorization": f"Bearer {ADMIN}"}
    async with httpx.AsyncClient(base_url=server.url(""), headers=headers, timeout=10) as c:

        async def call(method: str, path: str, body: dict[str, object]) -> None:
            r = await c.request(method, path, json=body)
            assert r.status_code == 200, r.text

        await call(
            "PUT", "/api/fleet/groups/acme-line-2", {"name": "ACME line 2", "customer": "ACME", "factory": "Turin"}
        )
        await call("PUT", "/api/fleet/groups/globex-lab", {"name": "Globex lab", "customer": "Globex"})
        await call("POST", "/api/fleet/robots", {"robot_id": "rap-1", "name": "Rap one", "group": "acme-line-2"})
        await call("POST", "/api/fleet/robots", {"robot_id": "rap-2", "name": "Rap two", "group": "acme-line-2"})
        await call("POST", "/api/fleet/robots", {"robot_id": "rap-9", "name": "Rap nine", "group": "globex-lab"})
        docs = [
            process("fetch-package-mailroom", "Fetch a package from the mailroom", "rap-1",
                    "## Steps\n1. navigation.navigate_to(mailroom)\n2. perception.find_object(`package`)\n\n"
                    "## Pitfalls & fixes\n- After 18:00 the door is often **closed**: ask reception.\n",
                    'task_pattern: "fetch|get|bring ... package|parcel ... mailroom"\ntags: [delivery, mailroom]\n'),
            process("water-the-plants", "Water the plants in the lobby", "rap-2"),
            process("restock-shelf", "Restock the parts shelf", "rap-9"),
            process("open-the-door-xss", "Open the door <img src=x onerror=\"window.__pwned = 3\">", "rap-1", XSS_BODY),
            process("charge-at-dock", "Return to the dock and charge", "shared"),
        ]  # fmt: skip
        for md in docs:
            await call("POST", "/api/processes", {"markdown": md})
        for pid, outcomes in (
            ("fetch-package-mailroom", [True, True, True, False]),
            ("water-the-plants", [False, True]),
        ):
            for n, ok in enumerate(outcomes):
                await call("POST", f"/api/processes/{pid}/outcomes", {"success": ok, "note": f"run {n + 1}"})
    # rap-1 uses the fleet-wide dock process once: an outcome recorded with its own token
    rap1 = {"authorization": f"Bearer {ROBOT_TOKENS['rap-1']}"}
    async with httpx.AsyncClient(base_url=server.url(""), headers=rap1, timeout=10) as c:
        r = await c.post("/api/processes/charge-at-dock/outcomes", json={"success": True})
        assert r.status_code == 200, r.text
    async with httpx.AsyncClient(base_url=server.url(""), headers=headers, timeout=10) as c:
        r = await c.put("/api/fleet/self-improve", json={"enabled": True, "group": "acme-line-2"})
        assert r.status_code == 200, r.text


MEMORY_XSS = 'the mug slipped <script>window.__pwned = 4</script><img src=x onerror="window.__pwned = 5">'


async def seed_experiences(data_dir: Path) -> None:
    """An episode of rap-1 with a success and a failure (whose text carries a stored script), and
    one memory of rap-9 — written through the Python API before the server starts."""
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(data_dir), "MEMORY_EMBEDDER": "hashing"})
    memory = Memory.open(settings)
    try:
        exp = memory.experiences
        rap1, rap9 = Principal.robot("rap-1"), Principal.robot("rap-9")
        session = await exp.start_session(rap1, "kitchen", {"task": {"name": "grasp mug"}})
        await exp.learn(
            rap1,
            "grip_force=12.5N holds the blue mug",
            {"params": {"grip_force": 12.5}, "task": {"name": "grasp mug", "success": True}},
            "kitchen",
            session.id,
        )
        await exp.learn(
            rap1,
            MEMORY_XSS,
            {
                "params": {"grip_force": 5},
                "spatial": {"xyz": [0.4, 0.1, 0.9]},
                "task": {"name": "grasp mug", "success": False},
            },
            "kitchen",
            session.id,
        )
        await exp.end_session(rap1, session.id, 0.5)
        await exp.learn(rap9, "the parts shelf is 1.2 m high", {"task": {"success": True}}, "lab")
        # one lesson (recording needs self-improvement on; the switch is left off, as the tests expect)
        await memory.fleet.register_robot(ADMIN_PRINCIPAL, "rap-1", "Rap one", "")
        await memory.fleet.set_self_improve(ADMIN_PRINCIPAL, True, "")
        await memory.lessons.record(rap1, "rap-1", "grip_force", {"newton": 12.5}, "kitchen", success=True)
        await memory.fleet.set_self_improve(ADMIN_PRINCIPAL, False, "")
    finally:
        memory.close()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    env = {
        "MEMORY_TOKEN": ADMIN,
        "MEMORY_ROBOT_TOKENS": robot_tokens(ROBOT_TOKENS),
        "MEMORY_EMBEDDER": "hashing",
    }
    await seed_experiences(tmp_path / "data")
    proc = ServerProcess(data_dir=tmp_path / "data", log_dir=tmp_path, env=env)
    await proc.start()
    try:
        await seed(proc)
        yield proc
    finally:
        await proc.stop()


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM.exists():  # noqa: ASYNC240 - one stat before any browser starts
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (scripts/check does so when run as root)")
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            await b.close()


async def open_page(browser: Browser) -> Page:
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    page = await context.new_page()
    page.set_default_timeout(TIMEOUT_MS)

    async def no_dialogs_from_content(dialog: object) -> None:
        raise AssertionError(f"a dialog opened: {dialog}")

    page.on("pageerror", lambda exc: pytest.fail(f"page error: {exc}"))
    return page


async def login(page: Page, server: ServerProcess, token: str) -> None:
    await page.goto(server.url("/"))
    await page.wait_for_url("**/login")
    await page.fill("#token", token)
    await page.click("button[type=submit]")
    await page.wait_for_url(server.url("/"))
    await expect(page.locator("#nav a").first).to_be_visible()


async def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


async def test_log_in_search_for_a_process_and_open_it(server: ServerProcess, browser: Browser) -> None:
    page = await open_page(browser)
    await page.goto(server.url("/login"))
    await shot(page, "login")
    await login(page, server, ADMIN)
    await expect(page.locator("#who")).to_have_text("admin")
    await expect(page.locator(".cards")).to_contain_text("Processes")
    await shot(page, "overview")
    await page.click("#nav a[data-path=processes]")
    await expect(page.locator("#process-table")).to_contain_text("Fetch a package from the mailroom")
    await shot(page, "processes")
    await page.fill("#process-query", "bring me the parcel from the mail room")
    await page.press("#process-query", "Enter")
    first = page.locator("#process-table tbody tr").first
    await expect(first).to_contain_text("Fetch a package from the mailroom")
    await first.locator("a").click()
    await expect(page.locator("#process-title")).to_have_text("Fetch a package from the mailroom")
    await expect(page.locator("#process-body h2").first).to_have_text("Steps")
    await expect(page.locator("#process-body strong")).to_have_text("closed")
    await expect(page.locator("table").first).to_contain_text("run 4")
    await shot(page, "process-detail")
    await page.goto(server.url("/#/search?q=bring%20me%20the%20parcel"))
    await expect(page.locator("#search-mode")).to_contain_text("Mode:")
    await expect(page.locator("ol.ranked li").first).to_contain_text("reliability")
    await shot(page, "search")
    for name in ("lessons", "health"):
        await page.goto(server.url(f"/#/{name}"))
        await expect(page.locator("h1")).to_have_text(name.capitalize())
        await shot(page, name)


async def test_a_self_improve_toggle_change_persists_after_reload(server: ServerProcess, browser: Browser) -> None:
    page = await open_page(browser)
    await login(page, server, ADMIN)
    await page.goto(server.url("/#/fleet"))
    switch = page.locator("select.group-switch[data-group=globex-lab]")
    await expect(switch).to_have_value("inherit")
    await switch.select_option("on")
    await expect(page.locator("#toast")).to_contain_text("saved")
    glob = page.locator("#global-self-improve")
    await expect(glob).not_to_be_checked()
    await glob.check()
    await expect(page.locator("#toast")).to_contain_text("Global switch saved")
    await page.reload()
    await expect(page.locator("select.group-switch[data-group=globex-lab]")).to_have_value("on")
    await expect(page.locator("#global-self-improve")).to_be_checked()
    move = page.locator("select.robot-group[data-robot=rap-2]")
    await move.select_option("globex-lab")
    await expect(page.locator("#toast")).to_contain_text("moved")
    await page.reload()
    await expect(page.locator("select.robot-group[data-robot=rap-2]")).to_have_value("globex-lab")
    await shot(page, "fleet")


async def test_a_scoped_robot_sees_the_fleet_read_only_under_a_banner(server: ServerProcess, browser: Browser) -> None:
    page = await open_page(browser)
    await login(page, server, ROBOT_TOKENS["rap-1"])
    await expect(page.locator("#who")).to_contain_text("robot rap-1")
    await page.goto(server.url("/#/fleet"))
    banner = page.locator("#readonly-banner")
    await expect(banner).to_be_visible()
    await expect(banner).to_contain_text("rap-1")
    await expect(banner).to_contain_text("Read-only")
    await expect(page.locator("#global-self-improve")).to_be_disabled()
    await expect(page.locator("select.group-switch[data-group=acme-line-2]")).to_be_disabled()
    await expect(page.locator("select.robot-group[data-robot=rap-1]")).to_be_disabled()
    await expect(page.locator("#groups-table")).not_to_contain_text("globex-lab")
    await expect(page.locator("#robots-table")).not_to_contain_text("rap-9")
    await expect(page.locator("#nav")).not_to_contain_text("Health")
    await shot(page, "fleet-scoped")
    await page.goto(server.url("/#/processes"))
    await expect(page.locator("#process-table")).to_contain_text("Fetch a package")
    await expect(page.locator("#process-table")).not_to_contain_text("Restock the parts shelf")


async def test_a_stored_script_in_a_process_renders_as_text(server: ServerProcess, browser: Browser) -> None:
    page = await open_page(browser)
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    await login(page, server, ADMIN)
    await page.goto(server.url("/#/processes"))
    await expect(page.locator("#process-table")).to_contain_text('<img src=x onerror="window.__pwned = 3">')
    await page.goto(server.url("/#/processes/open-the-door-xss"))
    body = page.locator("#process-body")
    await expect(body).to_contain_text("<script>window.__pwned = 1</script>")
    await expect(body).to_contain_text('<img src=x onerror="window.__pwned = 2">')
    await expect(page.locator("#process-title")).to_contain_text("<img src=x")
    assert await body.locator("script, img").count() == 0
    assert await page.locator("main img").count() == 0
    assert await page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == []
    await shot(page, "process-escaped")


async def test_experiences_filters_detail_and_a_session_timeline(server: ServerProcess, browser: Browser) -> None:
    page = await open_page(browser)
    dialogs: list[str] = []
    page.on("dialog", lambda d: dialogs.append(d.message))
    await login(page, server, ADMIN)
    await expect(page.locator("#recent-failures")).to_contain_text("the mug slipped <script>")
    await page.click("#nav a[data-path=experiences]")
    table = page.locator("#memories-table")
    await expect(table).to_contain_text("grip_force=12.5N holds the blue mug")
    await expect(table).to_contain_text("the parts shelf")
    await page.select_option("#memory-filters select[name=success]", "false")
    await page.click("#memory-filters button[type=submit]")
    await expect(table).not_to_contain_text("blue mug")
    await expect(table.locator("tbody tr")).to_have_count(1)
    await shot(page, "experiences")
    await table.locator("a").first.click()
    content = page.locator("#memory-content")
    await expect(content).to_have_text(MEMORY_XSS)
    await expect(page.locator("main")).to_contain_text('"grip_force": 5')
    await expect(page.locator("main")).to_contain_text("0.4")
    assert await page.locator("main img, main script").count() == 0
    assert await page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == []
    await shot(page, "experience-detail")
    await page.locator("dd a").click()  # its session
    timeline = page.locator("#session-timeline li")
    await expect(timeline).to_have_count(2)
    await expect(timeline.nth(1)).to_have_class("failure")
    await shot(page, "session-timeline")
    await page.click("#nav a[data-path=search]")
    await page.select_option("#search-what", "memories")
    await page.select_option("#search-collection", "kitchen")
    await page.fill("#search-query", "grip force for the mug")
    await page.click("#search-run")
    await expect(page.locator("#search-mode")).to_contain_text("Mode:")
    await expect(page.locator("ol.ranked")).to_contain_text("blue mug")
    await expect(page.locator("ol.ranked")).to_contain_text("<script>")
    assert await page.evaluate("typeof window.__pwned") == "undefined"
    await shot(page, "search-memories")


async def test_a_scoped_robot_sees_only_its_groups_memories(server: ServerProcess, browser: Browser) -> None:
    page = await open_page(browser)
    await login(page, server, ROBOT_TOKENS["rap-9"])
    await page.goto(server.url("/#/experiences"))
    table = page.locator("#memories-table")
    await expect(table).to_contain_text("the parts shelf")
    await expect(table).not_to_contain_text("blue mug")
    await page.goto(server.url("/#/sessions"))
    await expect(page.locator("#sessions-table")).to_contain_text("Nothing here yet")


async def test_review_findings_in_the_browser(server: ServerProcess, browser: Browser) -> None:
    """Found by review: "New process" with an existing process's title replaced it; the "to" date
    left its own day out; a stray % in the address left the page loading forever."""
    page = await open_page(browser)
    await login(page, server, ADMIN)
    # New process titled like an existing one: refused, the existing one untouched.
    await page.goto(server.url("/#/processes/~new"))
    editor = page.locator("#process-editor")
    await editor.fill(
        "---\nid: water-the-plants\ntitle: Water the lobby plants\n---\n\n1. a colleague's unrelated draft\n"
    )
    await page.click("#save-process")
    await expect(page.locator("main")).to_contain_text("exists already")
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {ADMIN}"}) as http:
        kept = (await http.get(server.url("/api/processes/water-the-plants"))).json()
    assert "unrelated draft" not in kept["markdown"]
    # "to" today includes today's memories.
    today = time.strftime("%Y-%m-%d", time.gmtime())
    await page.goto(server.url(f"/#/experiences?since={today}&until={today}"))
    await expect(page.locator("#memories-table")).to_contain_text("the parts shelf")
    # A stray % in the address is an ordinary page, not an endless "Loading…".
    await page.goto(server.url("/#/processes/50%"))
    await expect(page.locator("main")).to_contain_text(re.compile("invalid|not_found"))
    await expect(page.locator("main")).not_to_contain_text("Loading…")


#: Screenshots shown in docs/dashboard.md (each kept under 200 KB).
DOCS_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

#: Words of a table cell (outside the free-text memory column) that the layout broke across lines
#: (a break at a space or after a hyphen, as in "2026-|12-01" or "fetch-|package", is a wrap).
SPLIT_WORDS = """() => {
  const split = [];
  for (const td of document.querySelectorAll("main td:not(.content-cell), main th")) {
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.textContent.matchAll(/[^\\s-]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (tops.size > 1) split.push(m[0]);
      }
    }
  }
  return split;
}"""


async def docs_shot(page: Page, name: str) -> None:
    """A screenshot for the docs: the viewport only (a full page grows past 200 KB)."""
    await shot(page, name)
    DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(DOCS_SHOTS / f"{name}.png"), full_page=False)


async def test_table_cells_never_split_a_word(server: ServerProcess, browser: Browser) -> None:
    """Issue 30: `overflow-wrap: anywhere` let a squeezed table break "succes|s", "Collectio|n", "#2|9"."""
    page = await open_page(browser)
    await page.set_viewport_size({"width": 560, "height": 900})
    await login(page, server, ADMIN)
    for path, table in (("experiences", "#memories-table"), ("sessions", "#sessions-table"),
                        ("processes", "#process-table"), ("lessons", "#lessons-table")):  # fmt: skip
        await page.goto(server.url(f"/#/{path}"))
        await expect(page.locator(f"{table} tbody tr").first).to_be_visible()
        assert await page.evaluate(SPLIT_WORDS) == [], path


async def test_every_reliability_bar_says_how_many_outcomes_it_rests_on(
    server: ServerProcess, browser: Browser
) -> None:
    page = await open_page(browser)
    await login(page, server, ADMIN)
    chart = page.locator("figure.chart-box").first
    await expect(chart).to_contain_text("4 (3✓ 1✗)")
    await expect(chart).to_contain_text("no outcomes yet")  # the processes nobody ran: no 50 % bar
    await page.goto(server.url("/#/processes"))
    rows = page.locator("#process-table tbody tr")
    await expect(rows.filter(has_text="Fetch a package")).to_contain_text("4 outcomes")
    await expect(rows.filter(has_text="Restock the parts shelf")).to_contain_text("no outcomes yet")
    await expect(rows.filter(has_text="Restock the parts shelf")).not_to_contain_text("50%")


async def test_memory_search_picks_an_existing_collection_and_points_to_the_others(
    server: ServerProcess, browser: Browser
) -> None:
    """Issue 30: memory search defaulted to `default` (which held nothing) and said only "No matches."."""
    page = await open_page(browser)
    await login(page, server, ADMIN)
    await page.goto(server.url("/#/search"))
    await page.select_option("#search-what", "memories")
    picker = page.locator("#search-collection")
    assert await picker.locator("option").all_inner_texts() == ["kitchen (2)", "lab (1)"]
    await expect(picker).to_have_value("kitchen")
    await picker.select_option("lab")
    await page.fill("#search-query", "grip force for the mug")
    await page.click("#search-run")
    hint = page.locator("#search-elsewhere")
    await expect(hint).to_contain_text("kitchen (")
    await docs_shot(page, "search-collections")
    await hint.locator("button[data-collection=kitchen]").click()
    await expect(picker).to_have_value("kitchen")
    await expect(page.locator("ol.ranked")).to_contain_text("blue mug")


async def test_session_summaries_and_embedder_details_read_as_facts_not_json(
    server: ServerProcess, browser: Browser
) -> None:
    page = await open_page(browser)
    await login(page, server, ADMIN)
    await page.goto(server.url("/#/sessions"))
    await page.locator("#sessions-table tbody a").first.click()
    summary = page.locator("#session-summary")
    await expect(summary.locator("dt").first).to_be_visible()
    await expect(summary).to_contain_text("outcome score")
    await expect(summary).not_to_contain_text("{")
    await expect(page.locator("#session-context")).to_contain_text("grasp mug")
    await expect(page.locator("#session-context")).not_to_contain_text('"')
    await docs_shot(page, "session-summary")
    await page.goto(server.url("/#/health"))
    detail = page.locator("#embedder-detail")
    await expect(detail.locator("dt").first).to_be_visible()
    await expect(detail).not_to_contain_text("{")


async def test_sessions_and_lessons_have_charts_with_a_time_range(server: ServerProcess, browser: Browser) -> None:
    page = await open_page(browser)
    await login(page, server, ADMIN)
    await page.goto(server.url("/#/sessions"))
    chart = page.locator("#sessions-chart figure")
    await expect(chart).to_contain_text("last 30 days")
    await expect(chart.locator("rect.chart-col.success")).to_have_count(1)  # the episode scored 0.5
    await page.select_option("#chart-range", "7")
    await expect(page).to_have_url(re.compile(r"#/sessions\?days=7$"))
    await expect(page.locator("#sessions-chart figure")).to_contain_text("last 7 days")
    await docs_shot(page, "sessions")
    await page.goto(server.url("/#/lessons?days=90"))
    charts = page.locator("#lesson-charts")
    await expect(charts).to_contain_text("last 90 days")
    await expect(charts).to_contain_text("grip_force")
    await expect(charts).to_contain_text("1 (1✓ 0✗)")
    await expect(charts.locator("rect.chart-col.other")).to_have_count(1)
    await docs_shot(page, "lessons")
    await page.goto(server.url("/#/?days=7"))
    await expect(page.locator("main")).to_contain_text("Logged process outcomes per day (last 7 days)")
    await docs_shot(page, "overview")


async def test_the_robots_view_shows_each_robot_and_group_and_what_gets_worse(
    server: ServerProcess, browser: Browser
) -> None:
    page = await open_page(browser)
    await login(page, server, ADMIN)
    await page.click("#nav a[data-path=robots]")
    robots = page.locator("#robots-activity")
    rap1 = robots.locator("tr[data-robot=rap-1]")
    await expect(rap1).to_contain_text("acme-line-2")
    await expect(rap1).to_contain_text("50% (1 of 2)")  # one failed grasp of two with an outcome
    await expect(rap1).to_contain_text("2 processes · 2 memories · 1 lesson")
    await expect(rap1).to_contain_text("1 process used")
    await expect(robots.locator("tr[data-robot=rap-2]")).to_contain_text("no outcomes yet")
    groups = page.locator("#groups-activity")
    await expect(groups.locator("tr[data-group=acme-line-2]")).to_contain_text("rap-1, rap-2")
    await expect(groups.locator("tr[data-group=globex-lab]")).to_contain_text("0% (0 of 1)")
    trends = page.locator("#process-trends")
    await expect(trends).to_contain_text("Fetch a package from the mailroom")  # 3 ✓ then a ✗: 100 % → 50 %
    await expect(trends).to_contain_text("-50 points")
    await docs_shot(page, "robots")
    await rap1.locator("a").first.click()
    await expect(page.locator("#robot-title")).to_have_text("Robot rap-1")
    await expect(page.locator("#robot-cards")).to_contain_text("Failure rate")
    await expect(page.locator("#robot-activity rect.chart-col.failure")).to_have_count(1)
    await expect(page.locator("#robot-used")).to_contain_text("Return to the dock and charge")
    await docs_shot(page, "robot-detail")


async def test_a_robot_token_sees_only_its_groups_robots_in_the_robots_view(
    server: ServerProcess, browser: Browser
) -> None:
    page = await open_page(browser)
    await login(page, server, ROBOT_TOKENS["rap-9"])
    await page.goto(server.url("/#/robots"))
    robots = page.locator("#robots-activity")
    await expect(robots).to_contain_text("rap-9")
    await expect(robots).not_to_contain_text("rap-1")
    await expect(page.locator("#groups-activity")).not_to_contain_text("acme-line-2")
    await expect(page.locator("#process-trends")).not_to_contain_text("Fetch a package")
