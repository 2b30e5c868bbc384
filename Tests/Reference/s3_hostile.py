#!/usr/bin/env python3
"""A small fake S3 endpoint on loopback that misbehaves on purpose (docs/rules.md §6.2).

Used by Tests/WinBackSlowTests/S3/S3HostileTests.swift as the AWS_ENDPOINT_URL_S3 of a winback
run. It serves the files of --dir as the objects of any bucket under --prefix (ListObjectsV2,
HEAD and ranged GET, no signature checked) unless --mode says otherwise. It listens only on
127.0.0.1 and holds nothing it sends in memory: huge answers are generated as they go.

    s3_hostile.py --dir DIR --prefix w/ --port-file PORT --log LOG --mode MODE

--port-file      where the port it listens on is written once it listens
--log            one JSON object per line per request: "method", "path", "port",
                 "authorization" and "token" (x-amz-security-token), null when absent
--redirect-port-file
                 also listen on a second port (the redirect target), whose port is written here;
                 every request it gets is logged (with "port") and answered 200 with no body

Modes:
  serve           behave (the files of --dir)
  odd-keys        as serve, but each listed key has a control byte (U+0001) after the prefix
  repeat-token    every listing page is cut with the same continuation token
  drip            every answer announces 1000 bytes and sends one every 20 s
  huge-range      a ranged GET answers 206 announcing 2 GiB, and streams zeros
  endless-range   a ranged GET answers 206 with no length, streams zeros until the client leaves
  huge-list       a listing answers 200 with no length and an endless page of keys
  negative-size   as serve, but every listed object's Size is negative
  huge-head       every answer is 200 with 64 headers of 8 KiB each (half a MiB of head)
  redirect        every request answered 307 to the redirect target (same path)
  region          AWS's region redirect, for an endpoint whose paths start with /REGION/:
                  under /us-east-1/ a 301 with x-amz-bucket-region: eu-west-1; under
                  /eu-west-1/ served as in serve mode, when signed for eu-west-1 (else 403)
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOG_LOCK = threading.Lock()


def log(handler, port):
    if not ARGS.log:
        return
    entry = {
        "method": handler.command,
        "path": handler.path,
        "port": port,
        "authorization": handler.headers.get("Authorization"),
        "token": handler.headers.get("x-amz-security-token"),
    }
    with LOG_LOCK:
        with open(ARGS.log, "a") as f:
            f.write(json.dumps(entry) + "\n")


def files():
    return sorted(n for n in os.listdir(ARGS.dir) if os.path.isfile(os.path.join(ARGS.dir, n)))


def listed_key(name):
    if ARGS.mode == "odd-keys":
        return ARGS.prefix + "\x01" + name
    return ARGS.prefix + name


def file_of(key):
    """The file a key names, or None."""
    key = key.replace("\x01", "")
    if not key.startswith(ARGS.prefix):
        return None
    path = os.path.join(ARGS.dir, key[len(ARGS.prefix):])
    return path if os.path.isfile(path) and "/" not in key[len(ARGS.prefix):] else None


def quote_key(key, encode):
    # As S3 does with encoding-type=url: a space is "+", everything else unsafe is %HH.
    return urllib.parse.quote_plus(key, safe="/") if encode else key


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def split(self):
        """(region or None, bucket, key, query) of the request."""
        u = urllib.parse.urlsplit(self.path)
        parts = urllib.parse.unquote(u.path).lstrip("/").split("/", 2 if ARGS.mode == "region" else 1)
        region = parts.pop(0) if ARGS.mode == "region" else None
        bucket = parts[0] if parts else ""
        key = parts[1] if len(parts) > 1 else ""
        return region, bucket, key, urllib.parse.parse_qs(u.query, keep_blank_values=True)

    def send_plain(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if not any(k.lower() == "content-length" for k, _ in headers):
            # A HEAD gives the object's length itself: one Content-Length, as S3 sends.
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code):
        body = ("<?xml version=\"1.0\"?><Error><Code>%s</Code><Message>%s</Message></Error>" % (code, code)).encode()
        self.send_plain(status, body, [("Content-Type", "application/xml")])

    def stream(self, status, headers, chunk, announced=None, pause=0.0, first=b""):
        """Sends `first`, then `chunk` again and again until the client leaves (or `announced`
        bytes in all)."""
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if announced is not None:
            self.send_header("Content-Length", str(announced))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        sent = 0
        try:
            if first:
                self.wfile.write(first)
                sent += len(first)
            while announced is None or sent < announced:
                piece = chunk if announced is None else chunk[: announced - sent]
                self.wfile.write(piece)
                self.wfile.flush()
                sent += len(piece)
                if pause:
                    time.sleep(pause)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        self.close_connection = True

    def do_HEAD(self):
        self.handle_request()

    def do_GET(self):
        self.handle_request()

    def do_PUT(self):
        self.handle_request()

    def do_POST(self):
        self.handle_request()

    def do_DELETE(self):
        self.handle_request()

    def handle_request(self):
        log(self, self.server.server_address[1])
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        mode = ARGS.mode
        region, bucket, key, query = self.split()
        if mode == "huge-head":
            # 64 headers of 8 KiB each: half a megabyte of head before any body.
            return self.send_plain(200, b"", [("x-amz-meta-pad-%d" % i, "h" * 8192) for i in range(64)])
        if mode == "drip":
            return self.stream(200, [("Content-Type", "application/xml")], b" ", announced=1000, pause=20)
        if mode == "redirect":
            target = "http://127.0.0.1:%d%s" % (ARGS.redirect_port, self.path)
            return self.send_plain(307, b"", [("Location", target)])
        if mode == "region":
            if region != "eu-west-1":
                return self.send_plain(
                    301, b"", [("x-amz-bucket-region", "eu-west-1"), ("Location", "http://127.0.0.1:9/")])
            if "/eu-west-1/s3/aws4_request" not in (self.headers.get("Authorization") or ""):
                return self.error(403, "AuthorizationHeaderMalformed")
        listing = self.command == "GET" and "list-type" in query
        if listing:
            return self.listing(query)
        path = file_of(key)
        if path is None:
            return self.error(404, "NoSuchKey")
        size = os.path.getsize(path)
        etag = '"%x-%d"' % (int(os.path.getmtime(path)), size)
        if self.command == "HEAD":
            return self.send_plain(200, b"", [("ETag", etag), ("Content-Length", str(size))])
        rng = self.headers.get("Range")
        if mode == "huge-range" and rng:
            return self.stream(206, [("Content-Range", "bytes 0-%d/%d" % ((2 << 30) - 1, size))], b"\0" * 65536,
                               announced=2 << 30)
        if mode == "endless-range" and rng:
            return self.stream(206, [], b"\0" * 65536)
        with open(path, "rb") as f:
            data = f.read()
        if rng and rng.startswith("bytes="):
            a, b = rng[6:].split("-")
            a, b = int(a), min(int(b), size - 1)
            return self.send_plain(206, data[a:b + 1], [("ETag", etag), ("Content-Range", "bytes %d-%d/%d" % (a, b, size))])
        return self.send_plain(200, data, [("ETag", etag)])

    def listing(self, query):
        prefix = query.get("prefix", [""])[0]
        encode = query.get("encoding-type", [""])[0] == "url"
        head = '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
        if encode:
            head += "<EncodingType>url</EncodingType>"
        if ARGS.mode == "huge-list":
            entry = "<Contents><Key>%s</Key><Size>1</Size><ETag>x</ETag></Contents>" % ("k" * 900)
            return self.stream(200, [("Content-Type", "application/xml")], (entry * 64).encode(), first=head.encode())
        entries = []
        for name in files():
            k = listed_key(name)
            if not k.startswith(prefix):
                continue
            path = os.path.join(ARGS.dir, name)
            size = os.path.getsize(path)
            etag = '"%x-%d"' % (int(os.path.getmtime(path)), size)
            if ARGS.mode == "negative-size":
                size = -size
            entries.append(
                "<Contents><Key>%s</Key><Size>%d</Size><ETag>%s</ETag></Contents>"
                % (quote_key(k, encode), size, etag.replace('"', "&quot;")))
        if ARGS.mode == "repeat-token":
            tail = "<IsTruncated>true</IsTruncated><NextContinuationToken>again</NextContinuationToken>"
        else:
            tail = "<IsTruncated>false</IsTruncated>"
        body = (head + "".join(entries) + tail + "</ListBucketResult>").encode()
        self.send_plain(200, body, [("Content-Type", "application/xml")])


class RedirectTarget(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self):
        log(self, self.server.server_address[1])
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = answer


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--prefix", default="")
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--redirect-port-file")
    ap.add_argument("--log")
    ap.add_argument("--mode", default="serve")
    ARGS = ap.parse_args()
    ARGS.redirect_port = 9
    ThreadingHTTPServer.daemon_threads = True
    if ARGS.redirect_port_file:
        target = ThreadingHTTPServer(("127.0.0.1", 0), RedirectTarget)
        ARGS.redirect_port = target.server_address[1]
        threading.Thread(target=target.serve_forever, daemon=True).start()
        with open(ARGS.redirect_port_file + ".tmp", "w") as f:
            f.write(str(ARGS.redirect_port))
        os.rename(ARGS.redirect_port_file + ".tmp", ARGS.redirect_port_file)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
