"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests.

Only the remote model is a stand-in: litellm, its HTTP client, retries and timeouts all run for real.
``answer(body)`` maps a /v1/chat/completions request body to one of:
- a list of ``(content, finish_reason)``: the choices, with HTTP 200;
- ``("error", status)``: an OpenAI-style error with that HTTP status;
- ``("sleep", seconds)``: a hung server (the client's timeout must fire);
- ``("slow", seconds, choices)``: a slow server (a CPU model): the choices after that many seconds.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(self, answer):
        self.answer = answer
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, **body})
                outer._reply(self, body, outer.answer(body))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def _reply(handler, body: dict, step) -> None:
        if isinstance(step, tuple) and step[0] == "sleep":
            time.sleep(step[1])
            return
        if isinstance(step, tuple) and step[0] == "slow":
            time.sleep(step[1])
            step = step[2]
        if isinstance(step, tuple) and step[0] == "error":
            status, data = step[1], {"error": {"message": "overloaded", "type": "server_error"}}
        else:
            status = 200
            data = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": i, "finish_reason": finish, "message": {"role": "assistant", "content": c}}
                                for i, (c, finish) in enumerate(step)],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}
        raw = json.dumps(data).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
