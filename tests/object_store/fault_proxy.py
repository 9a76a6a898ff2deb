"""A fault-injecting reverse proxy in front of the suite's RGW (test support, not product code).

A real HTTP/1.1 server on a free loopback port (a thread per connection) that forwards every
request to the gateway, streaming bodies both ways, unless a scripted rule matches it. boto3 is
pointed at it through ``AWS_ENDPOINT_URL_S3`` (``proxy.env()``; path-style addressing, so the
bucket and key are in the path and a rule can match them). The Host header is forwarded as the
client signed it, so the gateway verifies the client's own signature.

    with FaultProxy(rgw.endpoint, credentials=(ACCESS, SECRET, "us-east-1")) as proxy:
        env = rgw.env() | proxy.env()
        proxy.fail("PUT", r"/log/", 503, "SlowDown", times=2)    # S3 XML error, then forwarded
        proxy.fail("PUT", r"/log/", 409, "ConditionalRequestConflict")
        proxy.stall("PUT", r"/data/", after_bytes=1024)          # part of the body, then silence
        proxy.drop("PUT", r"/log/", when="after")                 # done upstream, answer lost
        proxy.strip("PUT", r"\\.seedreuse-probe/", "If-None-Match")  # re-signed without it
        hold = proxy.hold("PUT", r"/log/")                        # parked until released
        hold.wait_arrived(60); os.kill(writer, SIGKILL); hold.release(forward=False)
        proxy.count("PUT", r"/log/"); proxy.counts()["PUT log"]

A rule matches a method ("*": any) and a regular expression searched in the unquoted request
target (``/bucket/key?query``); the first rule with matches left (``times``; None: always)
applies. Every request is recorded (``requests``), whatever happened to it. ``close()`` releases
every held or stalled request (their connections are closed) and stops the server.
"""
from __future__ import annotations

import http.client
import re
import socket
import threading
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 64 << 10
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "expect", "transfer-encoding"}
KINDS = ("log", "data", "leases", "readers", "claims", "used")
HOLD_BOUND_S = 300.0


def kind(method: str, target: str) -> str:
    """``"PUT log"``, ``"GET data"``, ``"LIST"``, ...: what a request is, for counting."""
    path, _, query = urllib.parse.unquote(target).partition("?")
    if method == "GET" and "list-type" in query:
        return "LIST"
    parts = path.strip("/").split("/")
    for p in reversed(parts[1:-1]):
        if p in KINDS:
            return f"{method} {p}"
    return f"{method} other"


class Hold:
    """A request parked at the proxy: ``arrived`` is set when it got there (``when="before"``:
    nothing forwarded yet; ``"after"``: the gateway has answered, the client has not heard)."""

    def __init__(self):
        self.arrived = threading.Event()
        self.done = threading.Event()        # a request held before forwarding was forwarded (or dropped)
        self._go = threading.Event()
        self.forward = True
        self.target: str | None = None

    def wait_arrived(self, timeout: float = 60.0) -> "Hold":
        if not self.arrived.wait(timeout):
            raise AssertionError(f"no matching request reached the proxy within {timeout:.0f} s")
        return self

    def release(self, *, forward: bool = True) -> None:
        """Let it go on (``forward``), or close its connection without sending anything."""
        self.forward = forward
        self._go.set()


class Rule:
    def __init__(self, method: str, pattern: str, action: str, times: int | None, *, min_length: int = 0,
                 **params):
        self.method, self.pattern, self.action, self.left = method.upper(), re.compile(pattern), action, times
        self.min_length, self.params, self.hits = min_length, params, 0

    def take(self, method: str, target: str, length: int) -> bool:
        if self.left == 0 or self.method not in ("*", method) or not self.pattern.search(target) \
                or length < self.min_length:
            return False
        self.hits += 1
        if self.left is not None:
            self.left -= 1
        return True


def _error_xml(code: str, target: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>injected by the '
            f'test proxy</Message><Resource>{target.split("?")[0]}</Resource><RequestId>fault-proxy</RequestId>'
            '</Error>').encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, *args):       # quiet: the tests read counts, not logs
        pass

    def _any(self):
        proxy, method, target = self.server.proxy, self.command, self.path
        rule = proxy._record_and_match(method, target, int(self.headers.get("Content-Length") or 0))
        action = rule.action if rule else "forward"
        try:
            if action == "error":
                self._drain()
                self._answer_error(rule.params["status"], rule.params["code"], method, target)
            elif action == "drop" and rule.params["when"] == "before":
                self._close()
            elif action == "hold" and rule.params["when"] == "before":
                hold = rule.params["hold"]
                hold.target = target
                hold.arrived.set()
                try:
                    if hold._go.wait(HOLD_BOUND_S) and hold.forward and not proxy.closed.is_set():
                        self._forward()
                    else:
                        self._close()
                finally:
                    hold.done.set()
            elif action == "stall":
                self._forward(stall=(rule.params["after_bytes"], rule.params["hold"]))
            elif action in ("drop", "hold"):
                self._forward(after=rule.params.get("hold"))
            else:
                self._forward(strip=rule.params["headers"] if action == "strip" else ())
        except (OSError, http.client.HTTPException):
            self._close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

    # ------------------------------------------------------------------ client side
    def _body_chunks(self):
        """The request body in chunks (Content-Length or chunked transfer encoding)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                data = self.rfile.read(size)
                self.rfile.readline()
                yield data
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:
            data = self.rfile.read(min(CHUNK, left))
            if not data:
                raise ConnectionError("the client closed the connection mid-body")
            left -= len(data)
            yield data

    def _drain(self) -> None:
        for _ in self._body_chunks():
            pass

    def _close(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _answer_error(self, status: int, code: str, method: str, target: str) -> None:
        body = b"" if method == "HEAD" else _error_xml(code, target)
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    # ------------------------------------------------------------------ upstream side
    def _forward(self, *, strip=(), stall: tuple[int, Hold] | None = None, after: Hold | None = None) -> None:
        proxy = self.server.proxy
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in HOP]
        chunks = self._body_chunks()
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        if strip:                      # buffered (small requests only): signed again without them
            body = b"".join(chunks)
            headers = proxy._resign(self.command, self.path, headers, body, strip)
            headers.append(("Content-Length", str(len(body))))
            chunks, chunked = iter([body] if body else []), False
        up = http.client.HTTPConnection(proxy.up_host, proxy.up_port, timeout=proxy.upstream_timeout)
        try:
            up.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for k, v in headers:
                up.putheader(k, v)
            if chunked:
                up.putheader("Transfer-Encoding", "chunked")
            up.endheaders()
            sent = 0
            for data in chunks:
                if stall is not None and sent + len(data) >= stall[0]:
                    up.send(data[:max(0, stall[0] - sent)])
                    stall[1].target = self.path
                    stall[1].arrived.set()
                    stall[1]._go.wait(HOLD_BOUND_S)       # silence until released
                    self._close()
                    return
                up.send(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                sent += len(data)
            if chunked:
                up.send(b"0\r\n\r\n")
            resp = up.getresponse()
            self._relay(resp, after)
        finally:
            up.close()

    def _relay(self, resp: http.client.HTTPResponse, after: Hold | None) -> None:
        length = resp.getheader("Content-Length")
        body = None
        if length is None or after is not None:        # buffer what is not streamed as it comes
            body = resp.read()
        if after is not None:
            after.target = self.path
            after.arrived.set()
            if not after._go.wait(HOLD_BOUND_S) or not after.forward or self.server.proxy.closed.is_set():
                self._close()
                return
        sized = body is not None and self.command != "HEAD"     # a HEAD keeps the object's length
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP and not (sized and k.lower() == "content-length"):
                self.send_header(k, v)
        if sized:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body is not None:
            self.wfile.write(body)
            return
        while True:
            data = resp.read(CHUNK)
            if not data:
                return
            self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    proxy: "FaultProxy"


class FaultProxy:
    def __init__(self, upstream: str, *, credentials: tuple[str, str, str] | None = None,
                 upstream_timeout: float = 120.0):
        u = urllib.parse.urlsplit(upstream)
        self.up_host, self.up_port = u.hostname, u.port or 80
        self.credentials, self.upstream_timeout = credentials, upstream_timeout
        self.rules: list[Rule] = []
        self.requests: list[tuple[str, str]] = []
        self.closed = threading.Event()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()

    def env(self) -> dict:
        return {"AWS_ENDPOINT_URL_S3": self.endpoint}

    # ------------------------------------------------------------------ rules
    def _add(self, method, pattern, action, times, **params) -> Rule:
        rule = Rule(method, pattern, action, times, **params)
        with self._lock:
            self.rules.append(rule)
        return rule

    def fail(self, method: str, pattern: str, status: int, code: str, *, times: int | None = 1) -> Rule:
        """Answer ``status`` with an S3 XML error ``code`` (the body is read, nothing forwarded)."""
        return self._add(method, pattern, "error", times, status=status, code=code)

    def stall(self, method: str, pattern: str, *, after_bytes: int, times: int | None = 1) -> Hold:
        """Forward the headers and the first ``after_bytes`` of the body of a request with a
        longer body, then neither read nor answer (the client times out; the gateway sees an
        unfinished upload) until released (both connections are closed then); ``arrived`` is
        set once a request stalls."""
        hold = Hold()
        self._add(method, pattern, "stall", times, min_length=after_bytes + 1, after_bytes=after_bytes, hold=hold)
        return hold

    def drop(self, method: str, pattern: str, *, when: str = "before", times: int | None = 1) -> Rule:
        """Close the connection without an answer: ``before`` forwarding, or ``after`` the
        gateway carried the request out (the answer is lost)."""
        return self._add(method, pattern, "drop", times, when=when,
                         hold=_released() if when == "after" else None)

    def strip(self, method: str, pattern: str, *headers: str, times: int | None = None) -> Rule:
        """Forward without ``headers`` (re-signed with ``credentials``), as a gateway that
        ignores them would act."""
        return self._add(method, pattern, "strip", times, headers={h.lower() for h in headers})

    def hold(self, method: str, pattern: str, *, when: str = "before", times: int | None = 1) -> Hold:
        """Park a matching request ``before`` forwarding it or ``after`` the gateway answered."""
        hold = Hold()
        self._add(method, pattern, "hold", times, when=when, hold=hold)
        return hold

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def _record_and_match(self, method: str, target: str, length: int) -> Rule | None:
        unquoted = urllib.parse.unquote(target)
        with self._lock:
            self.requests.append((method, unquoted))
            return next((r for r in self.rules if r.take(method, unquoted, length)), None)

    # ------------------------------------------------------------------ counting
    def count(self, method: str, pattern: str) -> int:
        rx = re.compile(pattern)
        with self._lock:
            return sum(1 for m, t in self.requests if method in ("*", m) and rx.search(t))

    def counts(self) -> Counter:
        with self._lock:
            return Counter(kind(m, t) for m, t in self.requests)

    # ------------------------------------------------------------------ signing
    def _resign(self, method: str, target: str, headers: list, body: bytes, strip) -> list:
        if self.credentials is None:
            raise AssertionError("strip() needs the credentials to sign the request again")
        from botocore.auth import S3SigV4Auth          # noqa: PLC0415 - only where a header is stripped
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        access, secret, region = self.credentials
        drop = set(strip) | {"authorization", "x-amz-date", "x-amz-content-sha256", "content-length"}
        kept = {k: v for k, v in headers if k.lower() not in drop}
        host = next(v for k, v in headers if k.lower() == "host")
        req = AWSRequest(method=method, url=f"http://{host}{target}", headers=kept, data=body)
        S3SigV4Auth(Credentials(access, secret), "s3", region).add_auth(req)
        return list(req.headers.items())

    def close(self) -> None:
        self.closed.set()
        with self._lock:
            for r in self.rules:
                h = r.params.get("hold")
                if h is not None:
                    h.release(forward=False)
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _released() -> Hold:
    h = Hold()
    h.release(forward=False)
    return h
