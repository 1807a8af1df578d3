from __future__ import annotations

from tests.conftest import MAILROOM, Client


async def test_saved_mailroom_document_is_found_first_with_full_markdown(client: Client) -> None:
    saved = await client.call("save_process", markdown=MAILROOM)
    assert saved["id"] == "fetch-package-mailroom"
    found = await client.call("find_processes", query="bring me the parcel from the mail room")
    assert found["processes"][0]["id"] == "fetch-package-mailroom"
    assert "## Steps" in found["processes"][0]["markdown"]
