"""Per-request cost of the one HTTP stack (Starlette on uvicorn, evolve/util/http_server.py) serving
`evolve serve`'s app, beside a bare standard-library server answering the same JSON (the stack
`evolve serve` used before, HTTP/1.0: one connection per request). No model: the routes measured
never generate (GET /v1/models, and a POST refused as a bad request after the token check and the
JSON parse), so the figure is the stack's own overhead per request, beside a generation's seconds.

    python benchmarks/http_stack.py [--requests 300]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from results_io import print_figures, write_results  # noqa: E402

MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "evolve"}]}


def stdlib_server() -> tuple[ThreadingHTTPServer, int]:
    class Handler(BaseHTTPRequestHandler):

        def log_message(self, *a):
            pass

        def _send(self, code: int, obj: dict) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            self._send(200, MODELS)

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._send(400, {"error": {"message": f"messages must be a non-empty list ({len(body)})"}})

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


def evolve_server():
    from evolve.policy.serve import ChatService, make_server

    srv = make_server(ChatService(None, "s", "m", 16), "127.0.0.1", 0, "tok")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    time.sleep(1.0)
    return srv, srv.server_address[1]


def measure(port: int, n: int) -> dict:
    out = {}
    for label, method, body in (("get", "GET", None), ("post_400", "POST", b'{"messages": []}')):
        for keep in (True, False):
            conn, took = http.client.HTTPConnection("127.0.0.1", port, timeout=30), []
            for _ in range(n):
                if not keep:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                t = time.perf_counter()
                conn.request(method, "/v1/models" if method == "GET" else "/v1/chat/completions", body=body,
                             headers={"Authorization": "Bearer tok", "Content-Type": "application/json"})
                conn.getresponse().read()
                took.append(time.perf_counter() - t)
            took = sorted(took[n // 10:])  # the first tenth warms up
            out[f"{label}_{'keepalive' if keep else 'newconn'}"] = {
                "median_ms": round(statistics.median(took) * 1e3, 3), "p90_ms": round(took[int(0.9 * len(took))] * 1e3, 3)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=300)
    args = ap.parse_args()
    std, std_port = stdlib_server()
    ev, ev_port = evolve_server()
    results = {"stdlib": measure(std_port, args.requests), "starlette_uvicorn": measure(ev_port, args.requests)}
    std.shutdown()
    ev.shutdown()
    figures = {f"{stack}_{k}_median_ms": v["median_ms"] for stack, r in results.items() for k, v in r.items()}
    write_results("http_stack", args=vars(args), results=results, figures=figures)
    print_figures(figures)


if __name__ == "__main__":
    main()
