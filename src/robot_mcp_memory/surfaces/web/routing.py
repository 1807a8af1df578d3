"""Declared endpoints: one table drives both the Starlette routes and the OpenAPI document.

Each endpoint names its arguments (a pydantic model: fields named in the path template are path
parameters, the rest query parameters), its JSON body model (or `NoBody`), its response model and
the error statuses it can answer. A handler receives a `Call` — the principal the tenancy
middleware bound to *this* request, the validated arguments and body — and returns a model.
Handlers are thin: one service call, no SQL, no policy (the services apply §6a).

One Starlette route per path dispatches on the method itself, so a wrong method is a JSON 405 in
the shared error shape, never Starlette's plain-text one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from robot_mcp_memory.errors import MemoryError_
from robot_mcp_memory.surfaces.web import problems
from robot_mcp_memory.surfaces.web.hosts import HostGuard
from robot_mcp_memory.tenancy.principal import Principal

#: The largest JSON body accepted (a 256k-character process document, UTF-8, with room to spare).
MAX_BODY = 2 * 1024 * 1024
#: Every route accepts every method and answers a wrong one itself (a JSON 405).
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
#: A path parameter: ``{id}`` (one segment) or ``{id:path}`` (may hold slashes, sent as ``%2F``).
_PATH_PARAM = re.compile(r"{([A-Za-z_][A-Za-z0-9_]*)(?::path)?}")


#: The principal of a public endpoint's unauthenticated caller: scoped to a robot id that cannot
#: exist (ids start with a letter or digit), so were a public handler ever to read data through a
#: service, it would see at most fleet-wide documents — never everything.
ANONYMOUS = Principal("robot", "-anonymous")


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="ignore")


class NoBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


A = TypeVar("A", bound=BaseModel)
B = TypeVar("B", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class Call(Generic[A, B]):
    principal: Principal
    args: A
    body: B
    request: Request
    #: Extra response headers a handler wants sent (``set-cookie`` on login/logout).
    headers: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[Call[Any, Any]], Awaitable[BaseModel]]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    args: type[BaseModel]
    body: type[BaseModel] | None
    response: type[BaseModel]
    summary: str
    tag: str
    errors: tuple[int, ...]
    status: int = 200
    public: bool = False
    description: str = ""

    @property
    def path_params(self) -> list[str]:
        return _PATH_PARAM.findall(self.path)

    @property
    def template(self) -> str:
        """The path as OpenAPI writes it: ``{id}`` for Starlette's ``{id:path}``."""
        return _PATH_PARAM.sub(r"{\1}", self.path)

    @property
    def operation_id(self) -> str:
        return self.handler.__name__


class Api:
    """A registry of endpoints (see the module docstring)."""

    def __init__(self, hosts: HostGuard | None = None) -> None:
        self.hosts = hosts or HostGuard()
        self.endpoints: list[Endpoint] = []
        #: Optional domains registered (reported by GET /api/session so the dashboard can adapt).
        self.features: set[str] = set()

    def route(
        self,
        method: str,
        path: str,
        *,
        args: type[A],
        body: type[B],
        response: type[R],
        summary: str,
        tag: str,
        errors: Sequence[int] = (),
        status: int = 200,
        public: bool = False,
    ) -> Callable[[Callable[[Call[A, B]], Awaitable[R]]], Callable[[Call[A, B]], Awaitable[R]]]:
        def register(fn: Callable[[Call[A, B]], Awaitable[R]]) -> Callable[[Call[A, B]], Awaitable[R]]:
            # Every POST/PUT/PATCH takes a JSON object (``{}`` when it needs nothing): a cross-site
            # HTML form cannot send application/json, so even with no tokens configured a foreign
            # page cannot make a browser change anything here.
            has_body = body is not NoBody or method in ("POST", "PUT", "PATCH")
            # 429: a bearer token from an address held by the throttle, on any protected endpoint.
            codes = set(errors) | {421, 500} | (set() if public else {401, 429})
            if args.model_fields or has_body:
                codes.add(400)
            if has_body:
                codes |= {413, 415}
            self.endpoints.append(
                Endpoint(
                    method=method,
                    path=path,
                    handler=fn,
                    args=args,
                    body=body if has_body else None,
                    response=response,
                    summary=summary,
                    tag=tag,
                    errors=tuple(sorted(codes)),
                    status=status,
                    public=public,
                    description=(fn.__doc__ or "").strip(),
                )
            )
            return fn

        return register

    def routes(self, *extra: Route) -> list[Route]:
        """One route per declared path, then `extra`, then a JSON 404 for any other /api/ path."""
        by_path: dict[str, dict[str, Endpoint]] = {}
        for ep in self.endpoints:
            by_path.setdefault(ep.path, {})[ep.method] = ep
        routes = [
            Route(path, _dispatcher(methods, self.hosts), methods=ALL_METHODS) for path, methods in by_path.items()
        ]
        routes.extend(extra)
        routes.append(Route("/api/{rest:path}", _unknown, methods=ALL_METHODS))
        for route in routes:
            # Every method reaches the handler, which answers a wrong one with a JSON 405 naming
            # the right ones — TRACE, PROPFIND … too (Starlette's own 405 is plain text).
            route.methods = None
        return routes

    @property
    def public_paths(self) -> set[str]:
        return {ep.path for ep in self.endpoints if ep.public}


def misdirected() -> Response:
    return problems.problem(
        "misdirected", "this Host is not served here: add the name to MEMORY_ALLOWED_HOSTS on the server", 421
    )


def _dispatcher(methods: dict[str, Endpoint], hosts: HostGuard) -> Callable[[Request], Awaitable[Response]]:
    allowed = ", ".join(sorted(methods))

    async def dispatch(request: Request) -> Response:
        if not hosts.allows(request.headers.get("host")):
            return misdirected()
        ep = methods.get(request.method) or (methods.get("GET") if request.method == "HEAD" else None)
        if ep is None:
            response = problems.problem("method_not_allowed", f"{request.url.path} accepts {allowed}")
            response.headers["allow"] = allowed
            return response
        return await _run(ep, request)

    return dispatch


async def _unknown(request: Request) -> Response:
    return problems.problem("not_found", f"no API endpoint {request.url.path}; GET /api/openapi.json lists them")


async def _run(ep: Endpoint, request: Request) -> Response:
    try:
        principal = request.scope.get("principal")
        if not isinstance(principal, Principal):
            if not ep.public:
                return problems.problem("unauthorized", "send 'Authorization: Bearer <token>' or log in")
            principal = ANONYMOUS
        try:
            raw: dict[str, Any] = dict(request.query_params)
            raw.update(request.path_params)
            args = ep.args.model_validate(raw)
        except ValidationError as exc:
            return problems.problem("invalid", _explain(exc))
        body: BaseModel = NoBody()
        if ep.body is not None:
            parsed = await _body(ep.body, request)
            if isinstance(parsed, Response):
                return parsed
            body = parsed
        call: Call[Any, Any] = Call(principal, args, body, request)
        result = await ep.handler(call)
        response = JSONResponse(result.model_dump(mode="json"), status_code=ep.status, headers=problems.NO_STORE)
        for name, value in call.headers:
            response.headers.append(name, value)
        return response
    except MemoryError_ as exc:
        return problems.from_error(exc)
    except Exception as exc:  # every other failure is a bug: answered generically, logged in full
        return problems.internal(exc)


async def _body(model: type[BaseModel], request: Request) -> BaseModel | Response:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return problems.problem(
            "unsupported_media_type", "send the body as JSON with Content-Type: application/json", 415
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        return problems.problem("too_large", f"the body is larger than {MAX_BODY} bytes", 413)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return problems.problem("too_large", f"the body is larger than {MAX_BODY} bytes", 413)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():  # `curl -X POST -H 'Content-Type: application/json'` with nothing to say
        raw = b"{}"
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        return problems.problem("invalid", "the body is not valid JSON")
    except RecursionError:  # nested thousands deep; each field's own parser bounds depth further
        return problems.problem("invalid", "the body nests too deeply to be read")
    if not isinstance(data, dict):
        return problems.problem("invalid", "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        return problems.problem("invalid", _explain(exc))


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
