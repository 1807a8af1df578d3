"""Login, logout and "who am I": the dashboard learns its scope up front from GET /api/session."""

from __future__ import annotations

from robot_mcp_memory import __version__, logs
from robot_mcp_memory.errors import MemoryError_
from robot_mcp_memory.surfaces.web.context import WebContext
from robot_mcp_memory.surfaces.web.models import LoggedOut, LoginBody, SessionInfo
from robot_mcp_memory.surfaces.web.routing import Api, Call, NoArgs, NoBody
from robot_mcp_memory.tenancy.middleware import AUTH_VIA_KEY, SESSION_COOKIE, SESSION_ID_KEY, client_address, client_id
from robot_mcp_memory.tenancy.principal import Principal

_log = logs.get("robot_mcp_memory.surfaces.web.session")


class Unauthorized(MemoryError_):
    code = "unauthorized"


class TooManyRequests(MemoryError_):
    code = "too_many_requests"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after  # seconds, sent as Retry-After


def _cookie(value: str, max_age: int, secure: bool) -> str:
    parts = [f"{SESSION_COOKIE}={value}", "HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={max_age}"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def register(api: Api, ctx: WebContext) -> None:
    throttle = ctx.login_throttle

    def info(principal: Principal, cookie: bool, csrf: str | None) -> SessionInfo:
        group = ctx.memory.fleet_repo.group_of(principal.robot_id) if principal.robot_id else None
        return SessionInfo(
            auth_enabled=ctx.auth.enabled,
            via=principal.via,
            robot_id=principal.robot_id,
            scoped=principal.scoped,
            group=group,
            label=principal.label,
            cookie=cookie,
            csrf_token=csrf,
            can_administer=not principal.scoped,
            features=sorted(api.features),
            version=__version__,
        )

    @api.route(
        "POST", "/api/login", args=NoArgs, body=LoginBody, response=SessionInfo, summary="Log in", tag="session",
        public=True, errors=(401, 429),
    )  # fmt: skip
    async def login(call: Call[NoArgs, LoginBody]) -> SessionInfo:
        """Check a token (sent in the JSON body, never in a URL) and start a browser session: the
        answer sets an HttpOnly, SameSite=Strict session cookie and carries the CSRF token."""
        if not ctx.auth.enabled:
            return info(call.principal, False, None)
        client = client_address(call.request.scope)
        principal = ctx.auth.resolve(call.body.token)
        wait = await throttle.attempt(client, client_id(principal) if principal is not None else None)
        if wait:
            _log.warning("web.login_throttled", client=client)
            raise TooManyRequests(
                f"too many failed logins from this address; try again in {wait} seconds", retry_after=wait
            )
        if principal is None:
            _log.info("web.login_refused", client=client)
            raise Unauthorized("that token is not valid here; paste the admin token or a robot token")
        session_id, session = await ctx.sessions.create(principal)
        secure = call.request.url.scheme == "https"
        call.headers.append(("set-cookie", _cookie(session_id, int(ctx.sessions.ttl_s), secure)))
        _log.info("web.login", tenant=principal.label)
        return info(principal, True, session.csrf_token)

    @api.route(
        "POST", "/api/logout", args=NoArgs, body=NoBody, response=LoggedOut, summary="Log out", tag="session",
    )  # fmt: skip
    async def logout(call: Call[NoArgs, NoBody]) -> LoggedOut:
        """End the browser session (if this request used one) and clear its cookie."""
        session_id = call.request.scope.get(SESSION_ID_KEY)
        ended = await ctx.sessions.end(session_id) if isinstance(session_id, str) else False
        call.headers.append(("set-cookie", _cookie("", 0, call.request.url.scheme == "https")))
        return LoggedOut(logged_out=ended)

    @api.route("GET", "/api/session", args=NoArgs, body=NoBody, response=SessionInfo, summary="Who am I", tag="session")
    async def session(call: Call[NoArgs, NoBody]) -> SessionInfo:
        """Who this caller is: unscoped (admin/open) or a robot and its group — and, for a browser
        session, the CSRF token to echo in X-CSRF-Token on writes."""
        via_cookie = call.request.scope.get(AUTH_VIA_KEY) == "cookie"
        csrf = None
        if via_cookie:
            sid = call.request.scope.get(SESSION_ID_KEY)
            live = await ctx.sessions.lookup(sid) if isinstance(sid, str) else None
            csrf = live.csrf_token if live is not None else None
        return info(call.principal, via_cookie, csrf)
