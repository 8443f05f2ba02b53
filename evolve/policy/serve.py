"""An OpenAI-compatible chat endpoint for one policy (``evolve serve``): POST /v1/chat/completions, GET /v1/models.

Standard library only (``http.server``). The served system text (a generation's evolved prompt) goes
first: a request's own system message is appended to it, so any tool pointed here gets the
generation as it was evaluated. Requests are served one at a time (one model, one lock).

Safety: binding anything but a loopback address needs a token (``Authorization: Bearer TOKEN``);
with a token set, every request must carry it (compared in constant time). Request bodies are
capped, and so is ``n``; ``max_tokens`` is clamped to ``--max-tokens``.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from evolve.errors import ConfigError

MAX_BODY = 1 << 20
MAX_N = 16


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    if not is_loopback(host) and not token:
        raise ConfigError(f"refusing to serve on {host} (not loopback) without --token")


class BadRequest(ValueError):
    pass


class ClientGone(Exception):
    """The client closed its connection before its request's turn: nobody would read the answer."""


def peer_closed(sock) -> bool:
    """True when the other end has closed: the socket reads as ready and a peek returns nothing."""
    import select
    import socket

    try:
        ready, _, _ = select.select([sock], [], [], 0)
        return bool(ready) and sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


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
        waiting (a reflector's retry gives up on a slow CPU model) costs no generation."""
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


def make_handler(service: ChatService, token: str | None, log=None):
    class Handler(BaseHTTPRequestHandler):
        server_version = "evolve-serve"

        def log_message(self, fmt, *args):  # one line per request, to the caller's log
            if log:
                log(f"{self.address_string()} {fmt % args}")

        def _send(self, code: int, obj: dict) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, message: str, kind: str = "invalid_request_error") -> None:
            self._send(code, {"error": {"message": message, "type": kind, "code": code}})

        def _authorized(self) -> bool:
            if not token:
                return True
            got = self.headers.get("Authorization", "")
            if hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
                return True
            self._error(401, "missing or wrong bearer token", "authentication_error")
            return False

        def do_GET(self):  # noqa: N802 - http.server naming
            if not self._authorized():
                return
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [
                    {"id": service.model_name, "object": "model", "owned_by": "evolve"}]})
            elif self.path.rstrip("/") in ("/health", ""):
                self._send(200, {"status": "ok"})
            else:
                self._error(404, f"no route {self.path}")

        def do_POST(self):  # noqa: N802
            if not self._authorized():
                return
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                self._error(404, f"no route {self.path}")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY:
                self._error(413 if length > MAX_BODY else 400, "body missing or too large")
                return
            try:
                body = json.loads(self.rfile.read(length))
                if not isinstance(body, dict):
                    raise BadRequest("the body must be a JSON object")
                if body.get("stream"):
                    raise BadRequest("stream=true is not supported")
                self._send(200, service.complete(body, lambda: peer_closed(self.connection)))
            except ClientGone:
                self.log_message("client gone before its turn: request dropped, nothing generated")
                self.close_connection = True
            except (BrokenPipeError, ConnectionResetError):  # it left while we generated: one line, no trace
                self.log_message("client gone before the answer was sent")
                self.close_connection = True
            except (json.JSONDecodeError, UnicodeDecodeError):
                self._error(400, "body is not JSON")
            except BadRequest as e:
                self._error(400, str(e))

    return Handler


def make_server(service: ChatService, host: str, port: int, token: str | None, log=None) -> ThreadingHTTPServer:
    check_bind(host, token)
    try:
        return ThreadingHTTPServer((host, port), make_handler(service, token, log))
    except OSError as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
