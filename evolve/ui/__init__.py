"""`evolve ui`: a read-only local web app over the lineage database.

``create_app(store, token=None)`` (``evolve.ui.app``) builds the Starlette app; ``serve`` runs it.
Pages are rendered on the server (Jinja2, autoescaped), charts are inline SVG, and the one
script (``static/ui.js``) only adds conveniences, so nothing is built or fetched.
"""

from __future__ import annotations

from evolve.errors import ConfigError
from evolve.util.http_server import is_loopback


def serve(db: str | None, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
          say=print) -> None:
    """Open the lineage read-only and serve it until interrupted."""
    from evolve.lineage import LineageStore
    from evolve.ui.app import LOOPBACK_HOSTS, create_app
    from evolve.util.http_server import Server, listen

    if not is_loopback(host) and not token:
        raise ConfigError(f"--host {host} is not a loopback address: pass --token T so that only holders of "
                          "the token can read the lineage")
    if not 0 < port < 65536:
        raise ConfigError(f"--port {port} is out of range")
    sock = listen(host, port)
    store = LineageStore.open(db, create=False, auto_upgrade=False)
    try:
        allowed = LOOPBACK_HOSTS if is_loopback(host) else ["*"]
        app = create_app(store, token=token, allowed_hosts=allowed, db_arg=db)
        shown = f"[{host}]" if ":" in host else host
        say(f"evolve ui: http://{shown}:{port}/" + (f"?token={token}" if token else "") + "  (Ctrl-C stops)")
        Server(app, sock).serve_forever()  # Ctrl-C ends it as before: "interrupted", exit 130
    finally:
        sock.close()
        store.close()
