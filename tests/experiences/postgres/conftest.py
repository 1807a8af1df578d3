from __future__ import annotations

import itertools

import pytest

from robot_mcp_memory.experiences.model import PUBLIC_FROM
from robot_mcp_memory.experiences.postgres import records
from robot_mcp_memory.experiences.sqlite import storage


@pytest.fixture(autouse=True)
def public_ids_in_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each backend draws its public memory ids from its own count, so the same writes on both are
    shown by the same ids and the parity tests compare what each answers, ids included. Real
    draws are random (`tests/experiences/test_public_ids.py`); this only lines the two up."""
    for module in (storage, records):
        count = itertools.count(PUBLIC_FROM + 1)
        monkeypatch.setattr(module, "draw_public_id", lambda count=count: next(count))
