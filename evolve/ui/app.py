"""The `evolve ui` web app: Starlette routes over a read-only LineageStore, Jinja2 pages.

Safety, in layers: Jinja2 autoescape (plus ``visible`` for control characters) on every value;
a Content-Security-Policy that allows only this app's own script and styles (so even an
escaping slip could not run injected script); only GET routes; a Host check against DNS
rebinding; and, for a non-loopback bind, a token (``?token=`` once, then an HttpOnly cookie,
or ``Authorization: Bearer``).
"""

from __future__ import annotations

import hmac
from pathlib import Path
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from evolve.errors import EvolveError
from evolve.ui import text, views

HERE = Path(__file__).parent
COOKIE = "evolve_ui_token"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(text.FILTERS)
    return env


class TokenGate:
    """ASGI middleware: every request must carry the token (query once, then the cookie)."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token

    def _ok(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        req = Request(scope)
        if self._ok(req.query_params.get("token")):  # strip it from the address bar, keep a cookie
            rest = urlencode([(k, v) for k, v in req.query_params.multi_items() if k != "token"])
            resp = RedirectResponse(req.url.path + (f"?{rest}" if rest else ""), status_code=303)
            resp.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            return await resp(scope, receive, send)
        auth = req.headers.get("authorization", "")
        if self._ok(req.cookies.get(COOKIE)) or (auth.startswith("Bearer ") and self._ok(auth[7:])):
            return await self.app(scope, receive, send)
        return await PlainTextResponse("token required: open the address `evolve ui` printed", 401)(
            scope, receive, send)


class SecurityHeaders:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def wrapped(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
                            (b"cache-control", b"no-store")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, wrapped)


def _url(request: Request):
    def url(route: str, **params) -> str:
        return str(request.url_for(route, **params).path)
    return url


def _render(request: Request, name: str, ctx: dict, status: int = 200) -> HTMLResponse:
    env = request.app.state.env
    html = env.get_template(name).render(url=_url(request), request=request, query=_query(request), **ctx)
    return HTMLResponse(html, status_code=status)


def _page(fn):
    """A GET endpoint: ``fn(request, store) -> (template, context)`` run in a worker thread (the
    queries block); an EvolveError (unknown run, generation, ...) is a 404 page naming it."""
    async def endpoint(request: Request) -> Response:
        def build():
            try:
                return _render(request, *fn(request, request.app.state.store))
            except EvolveError as e:
                return _render(request, "error.html", {"message": str(e)}, status=404)
        return await run_in_threadpool(build)
    return endpoint


def _runs(request, store):
    return "runs.html", views.runs_page(store)


def _run(request, store):
    name = views.resolve_run_name(store, request.path_params["run_id"])
    return "run.html", views.run_page(store, name, request.query_params, _url(request))


def _generation(request, store):
    name = views.resolve_run_name(store, request.path_params["run_id"])
    return "generation.html", views.generation_page(store, name, request.path_params["index"],
                                                    request.query_params, request.app.state.db_arg)


def _call(request, store):
    return "call.html", views.call_page(store, request.path_params["call_id"])


def _prompt(request, store):
    return "prompt.html", views.prompt_page(store, request.path_params["pv"])


def _compare(request, store):
    q = request.query_params
    return "compare.html", views.compare_page(store, q.get("a", "").strip(), q.get("b", "").strip())


async def _ping(request):
    return PlainTextResponse("ok")


def create_app(store, *, token: str | None = None, allowed_hosts: list[str] | None = None,
               db_arg: str | None = None) -> Starlette:
    """The app over an open ``store`` (read only; the caller closes it)."""
    routes = [
        Route("/", _page(_runs), name="runs"),
        Route("/run/{run_id:int}", _page(_run), name="run"),
        Route("/run/{run_id:int}/gen/{index:int}", _page(_generation), name="generation"),
        Route("/call/{call_id:int}", _page(_call), name="call"),
        Route("/prompt/{pv:str}", _page(_prompt), name="prompt"),
        Route("/compare", _page(_compare), name="compare"),
        Route("/ping", _ping, name="ping"),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(SecurityHeaders),
                  Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or LOOPBACK_HOSTS)]
    if token:
        middleware.append(Middleware(TokenGate, token=token))
    app = Starlette(routes=routes, middleware=middleware)
    app.state.store, app.state.env, app.state.db_arg = store, _env(), db_arg
    return app


def _query(request: Request):
    """``query(key=value, ...)``: this page's query string with some parameters replaced."""
    def build(**changes) -> str:
        items = {k: v for k, v in request.query_params.items()}
        for k, v in changes.items():
            if v is None or v == "":
                items.pop(k, None)
            else:
                items[k] = str(v)
        return "?" + urlencode(items) if items else request.url.path
    return build
