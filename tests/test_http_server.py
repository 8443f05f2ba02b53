"""The one HTTP stack (evolve/util/http_server.py): a bound socket, a Starlette app on uvicorn, real TCP."""

from __future__ import annotations

import http.client
import statistics
import threading
import time

import pytest

from evolve.errors import ConfigError
from evolve.util.http_server import Server, is_loopback, listen


def _app():
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def ping(request):
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/ping", ping)])


def test_keep_alive_requests_do_not_stall_and_shutdown_stops_the_server():
    """A response is written in two parts (head, body): without TCP_NODELAY on the accepted socket,
    each keep-alive request waited for the client's delayed ACK (~40 ms, measured)."""
    server = Server(_app(), listen("127.0.0.1", 0))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        for _ in range(50):  # the server is up once the first answer comes
            try:
                conn.request("GET", "/ping")
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
        conn.getresponse().read()
        took = []
        for _ in range(15):
            t = time.perf_counter()
            conn.request("GET", "/ping")
            r = conn.getresponse()
            assert r.status == 200 and r.read() == b'{"ok":true}'
            took.append(time.perf_counter() - t)
        assert statistics.median(took) < 0.030, took
    finally:
        server.shutdown()
        server.server_close()
    assert not thread.is_alive()


def test_a_busy_port_is_a_one_line_config_error():
    taken = listen("127.0.0.1", 0)
    try:
        with pytest.raises(ConfigError, match=r"cannot listen on 127\.0\.0\.1:\d+: "):
            listen("127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()
    with pytest.raises(ConfigError, match="out of range"):
        listen("127.0.0.1", 70000)


def test_loopback_names():
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "[::1]", "127.1.2.3"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "example.com", "::"))
