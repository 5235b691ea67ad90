#!/usr/bin/env python3
"""Fake Compute Engine metadata server for the startup script's bats tests.

Serves ROOT/computeMetadata/v1/... files on 127.0.0.1 at a free port chosen by
the kernel, written to PORT_FILE once listening. Like the real server it
answers 403 without the header "Metadata-Flavor: Google", 404 for a key that
is not set, and sets Metadata-Flavor: Google on answers. If ROOT/_unavailable
holds a number N, the next N requests get 503 (a metadata server still
booting). Every request is appended to ROOT/_requests.log.

A directory (a path ending in /, such as instance/attributes/) lists its
entries, one a line. Every answer carries an ETag (a hash of the value; of the
names and values below a directory). With ?wait_for_change=true the GET hangs,
as the real server's does, until the ETag differs from last_etag (or, without
last_etag, from the ETag when the request arrived), or timeout_sec passes;
then it answers with the current value. PUT to instance/guest-attributes/...
stores the body there and appends "PUT PATH BODY" to ROOT/_puts.log; with
ROOT/_guest_attributes_disabled present it answers 403 as the real server
does when guest attributes are not enabled.

Usage: fake_metadata.py ROOT PORT_FILE
"""

import hashlib
import http.server
import os
import sys
import time
import urllib.parse

ROOT = os.path.abspath(sys.argv[1])
PORT_FILE = sys.argv[2]


def read_value(path):
    """Returns (bytes, etag) of the file or directory listing at path, or None."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith("_"))
        digest = hashlib.md5()
        listing = []
        for name in names:
            full = os.path.join(path, name)
            listing.append(name + ("/" if os.path.isdir(full) else ""))
            digest.update(name.encode() + b"\0")
            if os.path.isfile(full):
                with open(full, "rb") as f:
                    digest.update(f.read() + b"\0")
        body = "".join(n + "\n" for n in listing).encode()
        return body, digest.hexdigest()[:16]
    if os.path.isfile(path):
        with open(path, "rb") as f:
            body = f.read()
        return body, hashlib.md5(body).hexdigest()[:16]
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self, code, body=b"", etag=None):
        self.send_response(code)
        self.send_header("Metadata-Flavor", "Google")
        self.send_header("Content-Type", "application/text")
        if etag:
            self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _log(self, line):
        with open(os.path.join(ROOT, "_requests.log"), "a") as log:
            log.write(line + "\n")

    def _unavailable(self):
        unavailable = os.path.join(ROOT, "_unavailable")
        if os.path.exists(unavailable):
            with open(unavailable) as f:
                left = int(f.read().strip() or 0)
            if left > 0:
                with open(unavailable, "w") as f:
                    f.write(str(left - 1))
                return True
        return False

    def _target(self, path):
        target = os.path.abspath(os.path.join(ROOT, path.lstrip("/")))
        if target != ROOT and not target.startswith(ROOT + os.sep):
            return None
        return target

    def do_GET(self):
        path, _, query = self.path.partition("?")
        params = urllib.parse.parse_qs(query)
        self._log(f"{self.path} flavor={self.headers.get('Metadata-Flavor')}")
        if self._unavailable():
            return self._answer(503, b"booting")
        if self.headers.get("Metadata-Flavor") != "Google":
            return self._answer(403, b"Missing Metadata-Flavor:Google header.")
        target = self._target(path)
        is_dir = path.endswith("/")
        if target is None or (is_dir and not os.path.isdir(target)) or (not is_dir and not os.path.isfile(target)):
            return self._answer(404, b"not found")
        value = read_value(target)
        if params.get("wait_for_change", [""])[0] == "true":
            timeout = float(params.get("timeout_sec", ["60"])[0])
            last = params.get("last_etag", [value[1] if value else ""])[0]
            deadline = time.monotonic() + timeout
            while value is not None and value[1] == last and time.monotonic() < deadline:
                time.sleep(0.05)
                value = read_value(target)
            if value is None:
                return self._answer(404, b"not found")
        self._answer(200, value[0], value[1])

    def do_PUT(self):
        path = self.path.partition("?")[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self._log(f"PUT {path} flavor={self.headers.get('Metadata-Flavor')}")
        if self._unavailable():
            return self._answer(503, b"booting")
        if self.headers.get("Metadata-Flavor") != "Google":
            return self._answer(403, b"Missing Metadata-Flavor:Google header.")
        target = self._target(path)
        if target is None or "/instance/guest-attributes/" not in path:
            return self._answer(404, b"not found")
        if os.path.exists(os.path.join(ROOT, "_guest_attributes_disabled")):
            return self._answer(403, b"Guest attributes endpoint access is disabled.")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target + ".tmp", "wb") as f:
            f.write(body)
        os.replace(target + ".tmp", target)
        with open(os.path.join(ROOT, "_puts.log"), "ab") as log:
            log.write(b"PUT " + path.encode() + b" " + body + b"\n")
        self._answer(200)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that gave up on a hanging GET (the watcher stopped) is normal.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def main():
    server = Server(("127.0.0.1", 0), Handler)
    tmp = PORT_FILE + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, PORT_FILE)
    server.serve_forever()


if __name__ == "__main__":
    main()
