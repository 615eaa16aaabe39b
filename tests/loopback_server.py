"""An HTTP server on 127.0.0.1, in a thread, that stands in for the authors' hosts in tests.

It serves files by name (GET /<name>), honours Range requests (guarded by If-Range on its ETag, as real
servers do), and injects the faults a download meets: a file cut short but served as complete, a connection
dropped part way through, a server that accepts and never answers, an HTTP error. Each fault is used once,
so the next request of the same file is served whole; "no_ranges" answers one request as a server that
ignores Range does. Every request is logged with its Range header.
Nothing in it reaches outside the machine.
"""

import hashlib
import http.server
import re
import threading


class LoopbackServer:
    """Use as a context manager: `with LoopbackServer() as server: server.files["a.zip"] = data`."""

    def __init__(self):
        self.files = {}
        # name -> ("truncate", n) | ("drop_after", n) | ("silent",) | ("status", code) | ("no_ranges",)
        self.faults = {}
        self.requests = []  # (name, Range header or None)
        self._stop = threading.Event()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                owner._answer(self)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def url(self):
        host, port = self._server.server_address
        return f"http://{host}:{port}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        return False

    def ranges(self, name):
        """The Range headers of the requests for `name`, in order (None: the whole file)."""
        return [given for asked, given in self.requests if asked == name]

    def _answer(self, handler):
        name = handler.path.lstrip("/").split("?")[0]
        self.requests.append((name, handler.headers.get("Range")))
        fault = self.faults.pop(name, None)
        if fault and fault[0] == "silent":
            self._stop.wait(60)  # accept, read the request, and say nothing
            return
        if fault and fault[0] == "status":
            handler.send_error(fault[1])
            return
        if name not in self.files:
            handler.send_error(404)
            return
        data = self.files[name]
        if fault and fault[0] == "truncate":
            data = data[: fault[1]]
        etag = '"' + hashlib.sha1(data).hexdigest()[:16] + '"'
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", handler.headers.get("Range") or "")
        ranges = not (fault and fault[0] == "no_ranges")
        if match and ranges and handler.headers.get("If-Range") in (None, etag):
            start = int(match.group(1))
            if start >= len(data):
                handler.send_response(416)
                handler.send_header("Content-Range", f"bytes */{len(data)}")
                handler.end_headers()
                return
            handler.send_response(206)
            handler.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            handler.send_response(200)
        handler.send_header("Content-Length", str(len(data) - start))
        handler.send_header("ETag", etag)
        handler.send_header("Accept-Ranges", "bytes")
        handler.end_headers()
        body = data[start:]
        if fault and fault[0] == "drop_after":
            handler.wfile.write(body[: fault[1]])
            handler.wfile.flush()
            handler.close_connection = True
            return
        handler.wfile.write(body)
