from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_mcp_memory.tenancy.principal import ADMIN, Principal
from robot_mcp_memory.tenancy.tokens import TokenAuth, generate_token, parse_robot_tokens


def test_a_token_map_parses_with_whitespace_ignored() -> None:
    assert parse_robot_tokens(" rap-1 : tokA1234 , rap-2:tokB1234 ") == {"rap-1": "tokA1234", "rap-2": "tokB1234"}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("rap-1:tokA1234,,rap-2:tokB1234", "#2 is empty"),
        ("rap-1:tokA1234,", "#2 is empty"),
        ("rap-1", "no ':'"),
        (":tokA1234", "empty robot"),
        ("rap-1:", "empty token"),
        ("rap 1:tokA1234", "robot id"),
        ("rap-1:short", "8+ characters"),
        ("rap-1:tokA1234,rap-1:tokB1234", "listed twice"),
        ("rap-1:tokA1234,rap-2:tokA1234", "reuses the token"),
        ("rap-1:adminadmin", "admin MEMORY_TOKEN"),
    ],
)
def test_malformed_maps_fail_fast_naming_the_problem_but_never_the_token(raw: str, fragment: str) -> None:
    with pytest.raises(ValueError, match="MEMORY_ROBOT_TOKENS") as info:
        parse_robot_tokens(raw, admin_token="adminadmin")
    text = " ".join(info.value.args[0])
    assert fragment in text
    for secret in ("tokA1234", "tokB1234", "adminadmin"):
        assert secret not in text


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_the_parser_either_parses_or_raises_value_error(raw: str) -> None:
    problems: list[str] = []
    parsed: dict[str, str] = {}
    try:
        parsed = parse_robot_tokens(raw)
    except ValueError as exc:
        problems = exc.args[0]
    assert all(isinstance(p, str) for p in problems)
    assert all(":" not in r and len(t) >= 8 for r, t in parsed.items())


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,10}", fullmatch=True).filter(lambda r: r not in ("shared", "unknown")),
        st.just(None),
        max_size=8,
    )
)
def test_a_generated_map_round_trips(robots: dict[str, None]) -> None:
    tokens = {r: generate_token() for r in robots}
    raw = ",".join(f"{r}:{t}" for r, t in tokens.items())
    assert parse_robot_tokens(raw) == tokens


def test_tokens_resolve_to_their_principal_and_unknown_tokens_to_none() -> None:
    auth = TokenAuth("adminadmin", {"rap-1": "tokA1234", "rap-2": "tokB1234"})
    assert auth.resolve("adminadmin") == ADMIN
    assert auth.resolve("tokA1234") == Principal.robot("rap-1")
    assert auth.resolve("tokB1234") == Principal.robot("rap-2")
    assert auth.resolve("tokA123") is None
    assert auth.resolve("") is None


def test_every_entry_is_compared_whichever_token_matches() -> None:
    auth = TokenAuth("adminadmin", {f"r{i}": f"token-{i:04d}" for i in range(20)})
    calls: list[int] = []
    original = auth.compare

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(1)
        return original(a, b)

    auth.compare = counting
    for presented in ("token-0000", "token-0019", "adminadmin", "nope-nope"):
        calls.clear()
        auth.resolve(presented)
        assert len(calls) == len(auth) == 21, presented


def test_no_tokens_means_auth_is_disabled() -> None:
    assert not TokenAuth(None, {}).enabled


@pytest.mark.parametrize("robot", ["shared", "unknown", "Shared"])
def test_a_token_for_a_reserved_robot_id_is_refused(robot: str) -> None:
    """A token for ``shared`` would let its holder write fleet-wide advice (found by review)."""
    with pytest.raises(ValueError, match="reserved"):
        parse_robot_tokens(f"r1:tok-r1-12345678,{robot}:tok-sh-12345678")
