#!/usr/bin/env python3
"""A recording, fault-injecting HTTP proxy in front of an S3 server on loopback.

Used by Tests/WinBackSlowTests/S3 as the AWS_ENDPOINT_URL_S3 of a winback run: it forwards
every request to the upstream S3 server (SeaweedFS) unchanged, the Host header included, so
that Signature Version 4 signatures still verify, and logs each request to a file. It only
listens on and connects to 127.0.0.1.

    s3_proxy.py --upstream http://127.0.0.1:8333 --port-file PORT --log LOG [faults]

--port-file   where the port it listens on is written once it listens (a fresh port is chosen
              unless --port is given)
--log         one JSON object per line, in order, under one lock: {"seq", "event": "start"}
              when a request has been read, {"seq", "event": "end", "status"} just before its
              answer is sent (so a client that has its answer finds it logged). Both carry "id" (the request's number, from 1), "method",
              "path" (with the query), "time" (seconds since the proxy started), "range",
              "checksum" (x-amz-checksum-sha256), "token" (x-amz-security-token) and
              "access_key" (from the Authorization header), each null when absent.

Faults (also read from the environment, S3_PROXY_<NAME> with the option's name upper-cased):
--fail-first N      answer the first N requests 503 SlowDown without forwarding them
--fail-always       answer every request 503 SlowDown
--fail-status N     answer those with this status instead of 503 (e.g. 400)
--fail-code CODE    and this S3 error code instead of SlowDown (e.g. RequestTimeout)
--fail-method M     fail only the requests of method M (e.g. DELETE), forwarding the others
--retry-after S     send Retry-After: S with those answers
--short-gets N      cut the body of the first N ranged GETs (object reads) short; -1: all of them
--short-mode MODE   how: "truncate" sends half of the body with a Content-Length that matches
                    it (a range shorter than asked), "drop" announces the whole length, sends
                    half and closes the connection
--die-after N       after forwarding N requests, exit at once (the server is gone: connections
                    refused from then on)
--complete-error N  answer the first N CompleteMultipartUpload requests 200 with an InternalError
                    body, without forwarding them (as S3 may when finishing fails); -1: all
--pause-after-list FILE
                    once the first ListObjectsV2 has been answered, hold every later request
                    until FILE exists (for a test to change the bucket between a listing and
                    the reads)
"""

import argparse
import http.client
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loopback  # noqa: E402  (the port file and serving, shared with the other doubles)

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "expect",
}


class State:
    def __init__(self, options):
        self.options = options
        self.lock = threading.Lock()
        self.seq = 0
        self.requests = 0
        self.forwarded = 0
        self.short_gets = 0
        self.complete_errors = 0
        self.listed = False
        self.started = time.monotonic()
        self.log = open(options.log, "a", encoding="utf-8")

    def next_request(self):
        with self.lock:
            self.requests += 1
            return self.requests

    def record(self, entry):
        with self.lock:
            self.seq += 1
            entry["seq"] = self.seq
            entry["time"] = round(time.monotonic() - self.started, 4)
            self.log.write(json.dumps(entry, sort_keys=True) + "\n")
            self.log.flush()

    def take_short_get(self):
        limit = self.options.short_gets
        with self.lock:
            if limit < 0 or self.short_gets < limit:
                self.short_gets += 1
                return True
            return False

    def take_complete_error(self):
        limit = self.options.complete_error
        with self.lock:
            if limit < 0 or self.complete_errors < limit:
                self.complete_errors += 1
                return True
            return False

    def count_forwarded(self):
        with self.lock:
            self.forwarded += 1
            return self.forwarded


def access_key(authorization):
    if not authorization or "Credential=" not in authorization:
        return None
    return authorization.split("Credential=", 1)[1].split("/", 1)[0]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and
    # the client's delayed ACK hold each answer back for tens of milliseconds.
    disable_nagle_algorithm = True
    server_version = "s3-proxy"

    def log_message(self, format, *args):
        pass

    def handle_one(self):
        state = self.server.state
        options = state.options
        number = state.next_request()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        about = {
            "id": number,
            "method": self.command,
            "path": self.path,
            "range": self.headers.get("Range"),
            "checksum": self.headers.get("x-amz-checksum-sha256"),
            "token": self.headers.get("x-amz-security-token"),
            "access_key": access_key(self.headers.get("Authorization")),
        }
        state.record(dict(about, event="start"))
        status = None
        ended = False

        def end(final):
            # Logged before the answer goes out: once the client has its answer, the log has it.
            nonlocal status, ended
            status = final
            ended = True
            state.record(dict(about, event="end", status=final))

        try:
            if options.die_after >= 0 and number > options.die_after:
                end("died")
                os._exit(0)
            if options.pause_after_list and state.listed:
                while not os.path.exists(options.pause_after_list):
                    time.sleep(0.02)
            if (options.fail_always or number <= options.fail_first) and (
                not options.fail_method or self.command == options.fail_method
            ):
                end(options.fail_status)
                self.answer_error(options.fail_status, options.fail_code)
                return
            if (
                self.command == "POST"
                and "uploadId=" in self.path
                and options.complete_error != 0
                and state.take_complete_error()
            ):
                end("complete-error")
                self.answer_error(200, "InternalError")
                return
            upstream = urllib.parse.urlsplit(options.upstream)
            connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=120)
            try:
                connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() in HOP_BY_HOP or name.lower() == "content-length":
                        continue
                    connection.putheader(name, value)
                if body or self.command in ("PUT", "POST"):
                    connection.putheader("Content-Length", str(len(body)))
                connection.endheaders(body if body else None)
                response = connection.getresponse()
                data = response.read()
                headers = [(n, v) for n, v in response.getheaders() if n.lower() not in HOP_BY_HOP]
                upstream_status = response.status
            finally:
                connection.close()
            state.count_forwarded()
            if self.command == "GET" and "list-type=2" in self.path:
                state.listed = True
            cut = (
                self.command == "GET"
                and about["range"] is not None
                and 200 <= upstream_status < 300
                and len(data) > 1
                and options.short_gets != 0
                and state.take_short_get()
            )
            if cut and options.short_mode == "drop":
                end("dropped")
                self.send_response_only(upstream_status)
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if cut:
                data = data[: len(data) // 2]
            end("truncated" if cut else upstream_status)
            self.send_response_only(upstream_status)
            for name, value in headers:
                if name.lower() == "content-length" and self.command != "HEAD":
                    continue
                self.send_header(name, value)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            self.wfile.flush()
        finally:
            if not ended:
                state.record(dict(about, event="end", status=status))

    def answer_error(self, status, code):
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
            "<Message>Injected by s3_proxy.py.</Message></Error>" % code
        ).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        if self.server.state.options.retry_after is not None:
            self.send_header("Retry-After", self.server.state.options.retry_after)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_one


def main():
    # A parent may start this with signals blocked (a test runner's thread mask is inherited):
    # stopping by SIGTERM must work.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    env = lambda name, default: os.environ.get("S3_PROXY_" + name, default)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, default=int(env("PORT", "0")))
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--fail-first", type=int, default=int(env("FAIL_FIRST", "0")))
    parser.add_argument("--fail-always", action="store_true", default=env("FAIL_ALWAYS", "") == "1")
    parser.add_argument("--fail-status", type=int, default=int(env("FAIL_STATUS", "503")))
    parser.add_argument("--fail-code", default=env("FAIL_CODE", "SlowDown"))
    parser.add_argument("--fail-method", default=env("FAIL_METHOD", None))
    parser.add_argument("--retry-after", default=env("RETRY_AFTER", None))
    parser.add_argument("--short-gets", type=int, default=int(env("SHORT_GETS", "0")))
    parser.add_argument("--short-mode", choices=["truncate", "drop"], default=env("SHORT_MODE", "truncate"))
    parser.add_argument("--die-after", type=int, default=int(env("DIE_AFTER", "-1")))
    parser.add_argument("--complete-error", type=int, default=int(env("COMPLETE_ERROR", "0")))
    parser.add_argument("--pause-after-list", default=env("PAUSE_AFTER_LIST", None))
    options = parser.parse_args()
    upstream = urllib.parse.urlsplit(options.upstream)
    if upstream.hostname != "127.0.0.1":
        sys.exit("s3_proxy.py forwards to 127.0.0.1 only, not " + str(upstream.hostname))

    server = ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    server.daemon_threads = True
    server.state = State(options)
    loopback.serve(server, options.port_file)


if __name__ == "__main__":
    main()
