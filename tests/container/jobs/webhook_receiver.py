"""Alertmanager webhook receiver for the container test: prints every POSTed body as one JSON line.

Runs in its own container on the cluster network; the test reads `docker logs`.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            print(json.dumps(json.loads(body)), flush=True)
        except ValueError:
            print(json.dumps({"unparsed": body.decode(errors="replace")}), flush=True)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        """Keep stdout for the payloads only."""


if __name__ == "__main__":
    HTTPServer(("0.0.0.0", int(sys.argv[1]) if len(sys.argv) > 1 else 9099), Receiver).serve_forever()
