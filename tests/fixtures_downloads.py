"""A file server on the loopback address and the archives it serves, for
the tests of downloads and unpacking.

- `FileServer`, `release_tar`: tests/test_model_cache.py and
  tests/hostile/test_cache.py.
- `make_tar`, `escaping_members`: tests/test_safe_archive.py,
  test_model_cache.py and tests/hostile/test_cache.py.

The crafted archive of `escaping_members` is the published pattern that
defeats the standard library's `data` filter on Pythons before 3.11.13 /
3.12.11 / 3.13.4 (CVE-2025-4517): nested folders with long names, a link per
level, a last link whose path overflows PATH_MAX (so the filter's realpath
stops resolving) pointing back up, and links through it that climb out.
"""

import base64
import collections
import hashlib
import http.server
import io
import os
import socket
import tarfile
import threading
import time

# The commit the server names in its X-Repo-Commit header.
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FileServer:
    """A threaded HTTP server on 127.0.0.1 serving `files` by path.

    `behaviour[path]`: `"drop_once"` (the first GET sends half the body and
    closes the connection), `"slow"` (the body in 20 pieces, 50 ms apart).
    `hits[path]` counts the GETs.
    """

    def __init__(self):
        self.files, self.behaviour = {}, {}
        self.hits = collections.Counter()
        self.auth = None  # (user, password) the server asks for
        self.seen = []  # (path, Authorization header or None)
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self._answer(body=False)

            def do_GET(self):
                self._answer(body=True)

            def _answer(self, body):
                path = self.path.split("?", 1)[0]
                header = self.headers.get("Authorization")
                server.seen.append((path, header))
                if server.auth and header != "Basic " + base64.b64encode(
                        ":".join(server.auth).encode()).decode():
                    self.send_response(401, "Unauthorized")
                    self.send_header("WWW-Authenticate", 'Basic realm="m"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                behaviour = server.behaviour.get(path)
                if isinstance(behaviour, tuple) and behaviour[0] == "redirect":
                    self.send_response(302)
                    self.send_header("Location", behaviour[1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = server.files.get(path)
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("ETag", '"%s"' % hashlib.sha256(data).hexdigest())
                self.send_header("X-Repo-Commit", COMMIT)
                self.end_headers()
                if not body:
                    return
                server.hits[path] += 1
                if behaviour == "drop_once" and server.hits[path] == 1:
                    self.wfile.write(data[:len(data) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if behaviour == "slow":
                    step = max(1, len(data) // 20)
                    for i in range(0, len(data), step):
                        self.wfile.write(data[i:i + step])
                        self.wfile.flush()
                        time.sleep(0.05)
                    return
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def release_tar(folder, top="albert_base"):
    """A .tar.gz of `folder`'s files under `top/`, as the releases are."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(folder, arcname=top)
    return buffer.getvalue()


def _add(tar, name, kind=tarfile.REGTYPE, linkname="", data=b""):
    """Adds one member of `kind` to an open tar."""
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    else:
        info.mode = 0o777 if kind == tarfile.DIRTYPE else 0o644
        tar.addfile(info)


def make_tar(path, members, mode="w:gz"):
    """Writes a tar of `members` (`(name, kind, linkname, data)` tuples)."""
    with tarfile.open(path, mode) as tar:
        for member in members:
            _add(tar, *member)
    return str(path)


def escaping_members(destination_length, climb=1, name="pwned",
                     data=b"written outside"):
    """The CVE-2025-4517 members for a destination path of this length:
    `name` lands `climb` folders above the destination."""
    steps = "abcdefghijklmnop"
    max_path = os.pathconf("/", "PC_PATH_MAX")
    component = "d" * ((max_path - destination_length - 1) // (len(steps) + 1))
    members, path = [], ""
    for step in steps:
        members.append((os.path.join(path, component), tarfile.DIRTYPE))
        members.append((os.path.join(path, step), tarfile.SYMTYPE, component))
        path = os.path.join(path, component)
    overflow = os.path.join(*steps, "l" * 254)
    members.append((overflow, tarfile.SYMTYPE,
                    os.path.join(*[".."] * len(steps))))
    members.append(("escape", tarfile.SYMTYPE, os.path.join(overflow, "..")))
    link = "escape"
    for i in range(1, climb):
        members.append((f"escape{i}", tarfile.SYMTYPE, link + "/.."))
        link = f"escape{i}"
    members.append((f"{link}/{name}", tarfile.REGTYPE, "", data))
    return members
