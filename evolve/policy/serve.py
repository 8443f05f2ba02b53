"""An OpenAI-compatible chat endpoint for one policy (``evolve serve``): POST /v1/chat/completions, GET /v1/models.

A Starlette app on uvicorn (``evolve.util.http_server``, the stack ``evolve ui`` uses too). The served
system text (a generation's evolved prompt) goes first: a request's own system message is appended to
it, so any tool pointed here gets the generation as it was evaluated. Requests are served one at a time (one model, one lock).

Safety: binding anything but a loopback address needs a token (``Authorization: Bearer TOKEN``);
with a token set, every request must carry it (compared in constant time). Request bodies are
capped, and so is ``n``; ``max_tokens`` is clamped to ``--max-tokens``.
"""

from __future__ import annotations

import hmac
import json
import threading
import time
import uuid

from evolve.errors import ConfigError
from evolve.util.http_server import is_loopback

MAX_BODY = 1 << 20
MAX_N = 16


def check_bind(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise ConfigError(f"refusing to serve on {host} (not loopback) without --token")


class BadRequest(ValueError):
    pass


class ClientGone(Exception):
    """The client closed its connection before its request's turn: nobody would read the answer."""


def apply_system(system_text: str, messages: list[dict]) -> list[dict]:
    """The served prompt first; a client's system message is appended to it, not put in its place."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    clean = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant") \
                or not isinstance(m.get("content"), str):
            raise BadRequest("each message needs a role (system|user|assistant) and string content")
        clean.append({"role": m["role"], "content": m["content"]})
    client_system = [m["content"] for m in clean if m["role"] == "system"]
    rest = [m for m in clean if m["role"] != "system"]
    system = "\n".join(t for t in [system_text.strip(), *client_system] if t.strip())
    return ([{"role": "system", "content": system}] if system else []) + rest


class ChatService:
    """Turns an OpenAI chat request into policy samples. ``generate(messages, n, seed, sampling)``."""

    def __init__(self, policy, system_text: str, model_name: str, max_tokens: int = 512):
        self.policy = policy
        self.system_text = system_text
        self.model_name = model_name
        self.max_tokens = max_tokens
        self.lock = threading.Lock()

    def complete(self, body: dict, client_gone=lambda: False) -> dict:
        """``client_gone()`` is asked once the request's turn comes: a client that timed out while
        waiting (a reflector's retry gives up on a slow CPU model) costs no generation. Runs in a
        worker thread: generation blocks."""
        from evolve.policy.backends.hf import HFBackend

        messages = apply_system(self.system_text, body.get("messages"))
        n = _int(body.get("n", 1), "n", 1, MAX_N)
        # Requests above the server's cap are served up to the cap (finish_reason "length" says so), as a
        # client such as the litellm reflector asks for 2048 tokens by default.
        asked = _int(body.get("max_tokens") or body.get("max_completion_tokens") or self.max_tokens,
                     "max_tokens", 1, 1 << 20)
        max_tokens = min(asked, self.max_tokens)
        base = self.policy.spec.sampling
        temperature = _float(body.get("temperature", base.temperature), "temperature", 0.0, 5.0)
        top_p = _float(body.get("top_p", base.top_p), "top_p", 1e-6, 1.0)
        seed = _int(body.get("seed", 0) or 0, "seed", 0, 2**31 - 1)
        # temperature 0 (greedy) is approximated by a very low temperature: the backend samples
        sampling = base.model_copy(update={"temperature": max(temperature, 1e-4), "top_p": top_p,
                                           "max_new_tokens": max_tokens, "n": n})
        with self.lock:
            if client_gone():
                raise ClientGone
            backend = HFBackend(self.policy.model, self.policy.tokenizer, sampling)
            samples = backend.generate([messages], n, seed)[0]
        choices = [{"index": i, "message": {"role": "assistant", "content": s.text},
                    "finish_reason": "length" if s.truncated else "stop"} for i, s in enumerate(samples)]
        prompt_tokens = len(samples[0].prompt_ids) if samples else 0
        completion_tokens = sum(len(s.completion_ids) for s in samples)
        return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
                "model": self.model_name, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}


def _int(v, name, lo, hi) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v or not lo <= v <= hi:
        raise BadRequest(f"{name} must be an integer in [{lo}, {hi}]")
    return int(v)


def _float(v, name, lo, hi) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi:
        raise BadRequest(f"{name} must be a number in [{lo}, {hi}]")
    return float(v)


async def _read_json(request) -> dict:
    """The request's JSON object, refusing a body over ``MAX_BODY`` before reading it all."""
    try:
        length = int(request.headers.get("content-length") or 0)
    except ValueError:
        raise BadRequest("bad Content-Length") from None
    if length <= 0 or length > MAX_BODY:
        raise _TooLarge if length > MAX_BODY else BadRequest("body missing or too large")
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise _TooLarge
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadRequest("body is not JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    if body.get("stream"):
        raise BadRequest("stream=true is not supported")
    return body


class _TooLarge(BadRequest):
    pass


def _error(code: int, message: str, kind: str = "invalid_request_error"):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=code)


def create_app(service: ChatService, token: str | None, log=None):
    """The Starlette app: the OpenAI routes, a bearer-token check on every request, JSON errors."""
    from anyio import from_thread
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    say = log or (lambda line: None)
    expected = f"Bearer {token}".encode() if token else None

    def denied(request):
        got = request.headers.get("authorization", "").encode()
        if expected is None or hmac.compare_digest(got, expected):
            return None
        return _error(401, "missing or wrong bearer token", "authentication_error")

    async def models(request):
        return denied(request) or JSONResponse({"object": "list", "data": [
            {"id": service.model_name, "object": "model", "owned_by": "evolve"}]})

    async def health(request):
        return denied(request) or JSONResponse({"status": "ok"})

    async def chat(request):
        if (no := denied(request)) is not None:
            return no
        peer = request.client.host if request.client else "-"
        try:
            body = await _read_json(request)
            # asked from the worker thread once the request's turn comes (the model is one lock)
            gone = lambda: from_thread.run(request.is_disconnected)  # noqa: E731
            out = await run_in_threadpool(service.complete, body, gone)
        except ClientGone:
            say(f"{peer} client gone before its turn: request dropped, nothing generated")
            return _error(499, "client closed the request")
        except BadRequest as e:
            return _error(413 if isinstance(e, _TooLarge) else 400, str(e) or "body missing or too large")
        say(f"{peer} POST {request.url.path} 200")
        return JSONResponse(out)

    async def not_found(request, exc):  # the token is checked first here too: no route probing without it
        if (no := denied(request)) is not None:
            return no
        if getattr(exc, "status_code", 404) == 405:
            return _error(405, f"method {request.method} not allowed on {request.url.path}")
        return _error(404, f"no route {request.url.path}")

    routes = [Route(p, models, methods=["GET"]) for p in ("/v1/models", "/models", "/v1/models/", "/models/")]
    routes += [Route(p, health, methods=["GET"]) for p in ("/health", "/")]
    routes += [Route(p, chat, methods=["POST"]) for p in ("/v1/chat/completions", "/chat/completions",
                                                          "/v1/chat/completions/", "/chat/completions/")]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})


def make_server(service: ChatService, host: str, port: int, token: str | None, log=None):
    """The app on (host, port), not yet serving: ``serve_forever()``, ``shutdown()``, ``server_address``."""
    from evolve.util.http_server import Server, listen

    check_bind(host, token)
    return Server(create_app(service, token, log), listen(host, port))
