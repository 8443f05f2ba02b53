"""The one HTTP server stack: Starlette apps served by uvicorn (``evolve ui`` and ``evolve serve``).

``listen(host, port)`` binds first, so a busy port or a bad address is a one-line ``ConfigError`` before
anything heavy loads and port 0 names its real port at once; ``Server(app, sock)`` runs the app on
that socket (``serve_forever`` in the calling thread; ``shutdown`` from another one).
"""

from __future__ import annotations

import ipaddress
import socket
import threading

from evolve.errors import ConfigError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port)."""
    if not 0 <= port < 65536:
        raise ConfigError(f"--port {port} is out of range")
    host = host.strip("[]")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only when the proto says
        # TCP (base_events._set_nodelay); without it a keep-alive request waited ~40 ms (Nagle + delayed ACK).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as e:
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


class Server:
    """uvicorn over an already-bound socket; no access log (the app logs what it needs)."""

    def __init__(self, app, sock: socket.socket) -> None:
        import uvicorn

        self.sock = sock
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                                     lifespan="off", timeout_graceful_shutdown=5))
        self._done = threading.Event()

    @property
    def server_address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return host, port

    def serve_forever(self) -> None:
        """Serve until ``shutdown()`` or Ctrl-C (uvicorn re-raises the signal once it has stopped)."""
        try:
            self._server.run(sockets=[self.sock])
        finally:
            self._done.set()

    def shutdown(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._done.wait(timeout)

    def server_close(self) -> None:
        self.sock.close()
