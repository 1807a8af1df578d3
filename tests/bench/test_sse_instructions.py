"""The in-process SSE ping benchmark (`bench.sse_instructions`) still runs, with a few pings, in
its process-time mode (callgrind takes minutes; the figures are measured by ``python -m
bench.sse_instructions`` and written up in docs/benchmarks.md). No timing is asserted."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import sse_instructions as bench
from robot_mcp_memory import logs


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """`main` configures logging at warning, as a command does; the tests log at debug."""
    yield
    logs.configure("debug")


@pytest.mark.usefixtures("logging_restored")
def test_without_valgrind_the_bench_pings_both_apps_and_prints_the_process_time_as_the_noisy_figure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bench, "callgrind_available", lambda: False)
    printed: list[str] = []

    assert bench.main(["--pings", "3", "--warmup", "2", "--repeats", "2"], out=printed.append) == 0

    (text,) = printed
    assert "process time per ping" in text
    assert "valgrind not found" in text
    assert "noisy figure" in text
    rows = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in text.splitlines() if line.startswith("  "))
    assert list(rows) == ["ours", "bare", "ours ÷ bare"]
    ours, bare = (float(rows[side].removesuffix(" µs").replace(",", "")) for side in ("ours", "bare"))
    assert ours > 0
    assert bare > 0
    assert rows["ours ÷ bare"] == f"{ours / bare:.2f}×"


class _Counting:
    """A window that counts the answers its pings got, as seen by the client."""

    def __init__(self) -> None:
        self.opened = self.closed = 0

    def open(self) -> None:
        self.opened += 1

    def close(self) -> None:
        self.closed += 1


async def test_every_ping_is_awaited_on_the_stream_and_each_window_is_opened_once_around_its_own(
    tmp_path: Path,
) -> None:
    first, second = _Counting(), _Counting()
    with bench.built("bare", tmp_path) as (app, token):
        answered = await bench.ping_session(app, token, 2, [(3, first), (0, second)])
    assert answered == 5
    assert (first.opened, first.closed, second.opened, second.closed) == (1, 1, 1, 1)


async def test_our_app_has_tokens_on_and_a_token_it_does_not_know_fails_the_bench(tmp_path: Path) -> None:
    unknown = "not-a-token-of-this-fleet-0123"
    with bench.built("ours", tmp_path, token=unknown) as (app, token), pytest.raises(bench.PingFailed, match="401"):
        await bench.ping_session(app, token, 1, [])


async def test_our_app_answers_the_robot_token_it_was_built_with(tmp_path: Path) -> None:
    with bench.built("ours", tmp_path) as (app, token):
        assert await bench.ping_session(app, token, 2, [(2, _Counting())]) == 4


def test_callgrind_dumps_are_read_by_the_name_each_was_given(tmp_path: Path) -> None:
    out = tmp_path / "callgrind.out"

    def dump(suffix: str, trigger: str, total: int) -> None:
        head = f"version: 1\ncmd: python\npart: 1\ndesc: Trigger: {trigger}\nevents: Ir\nsummary: 0\n"
        body = f"\nfn=x\n0 {total}\ntotals: {total}\n"
        (tmp_path / f"{out.name}{suffix}").write_text(head + body, encoding="utf-8")

    dump(".1", "dump empty", 297)
    dump(".2", "dump pings", 564_000_297)
    dump("", "Program termination", 0)  # the file written at exit: not a window

    assert bench.dumped_totals(out) == {"empty": 297, "pings": 564_000_297}
