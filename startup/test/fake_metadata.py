#!/usr/bin/env python3
"""Fake Compute Engine metadata server for the startup script's bats tests.

Serves ROOT/computeMetadata/v1/... files on 127.0.0.1 at a free port chosen by
the kernel, written to PORT_FILE once listening. Like the real server it
answers 403 without the header "Metadata-Flavor: Google", 404 for a key that
is not set, and sets Metadata-Flavor: Google on answers. If ROOT/_unavailable
holds a number N, the next N requests get 503 (a metadata server still
booting). Every request is appended to ROOT/_requests.log.

Usage: fake_metadata.py ROOT PORT_FILE
"""

import http.server
import os
import sys

ROOT = os.path.abspath(sys.argv[1])
PORT_FILE = sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    def _answer(self, code, body=b""):
        self.send_response(code)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Type", "application/text")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        with open(os.path.join(ROOT, "_requests.log"), "a") as log:
            log.write(f"{path} flavor={self.headers.get('Metadata-Flavor')}\n")
        unavailable = os.path.join(ROOT, "_unavailable")
        if os.path.exists(unavailable):
            with open(unavailable) as f:
                left = int(f.read().strip() or 0)
            if left > 0:
                with open(unavailable, "w") as f:
                    f.write(str(left - 1))
                return self._answer(503, b"booting")
        if self.headers.get("Metadata-Flavor") != "Google":
            return self._answer(403, b"Missing Metadata-Flavor:Google header.")
        target = os.path.abspath(os.path.join(ROOT, path.lstrip("/")))
        if not target.startswith(ROOT + os.sep) or not os.path.isfile(target):
            return self._answer(404, b"not found")
        with open(target, "rb") as f:
            self._answer(200, f.read())

    def log_message(self, *args):
        pass


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tmp = PORT_FILE + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, PORT_FILE)
    server.serve_forever()


if __name__ == "__main__":
    main()
