#!/usr/bin/env python3
"""Signs S3 requests with botocore, the reference for Sources/WinBackS3/SigV4.swift.

Reads a JSON list of requests on stdin and prints a JSON list of results, one per request, in
the same order. Used by Tests/WinBackTests/S3/SigV4Tests.swift; needs `pip install botocore`.

Each request:
    method            "GET", "PUT", ...
    endpoint          scheme, host and port, no path: "http://127.0.0.1:8333"
    bucket            the bucket for a path-style URL, or null when it is in the host
    key               the object key, raw (not encoded); "" for the bucket itself
    query             [[name, value], ...], raw
    headers           [[name, value], ...], the other headers to sign
    body              the body as base64, or null for none
    unsigned_payload  true to sign with UNSIGNED-PAYLOAD instead of the body's SHA-256
    access_key, secret_key, token (or null), region
    timestamp         the signing time, "2013-05-24T00:00:00Z"

The URL is built the way botocore's serializer builds S3 URLs: the bucket and the key are
percent-encoded by botocore.utils.percent_encode (the key with "/" and "~" kept, as for a
greedy {Key+} label) and the query by percent_encode_sequence. Then botocore.auth.S3SigV4Auth
signs an AWSRequest for that URL, with its clock fixed to `timestamp`.

Each result:
    url                the URL signed
    path               its path, as botocore encoded it
    canonical_request  botocore's canonical request
    headers            {"Authorization", "X-Amz-Date", "X-Amz-Content-SHA256" and, with a
                        token, "X-Amz-Security-Token"}: what botocore added
"""

import base64
import datetime
import json
import sys
import types
from urllib.parse import urlsplit

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode, percent_encode_sequence

ADDED = ["Authorization", "X-Amz-Date", "X-Amz-Content-SHA256", "X-Amz-Security-Token"]


def build_url(case):
    path = ""
    if case.get("bucket") is not None:
        path += "/" + percent_encode(case["bucket"])
    path += "/" + percent_encode(case["key"], safe="/~")
    url = case["endpoint"] + path
    query = [(name, value) for name, value in case.get("query") or []]
    if query:
        url += "?" + percent_encode_sequence(query)
    return url


def sign(case):
    when = datetime.datetime.strptime(case["timestamp"], "%Y-%m-%dT%H:%M:%SZ")
    # add_auth reads the clock through this module-level name.
    botocore.auth.get_current_datetime = lambda remove_tzinfo=True: when

    url = build_url(case)
    body = base64.b64decode(case["body"]) if case.get("body") is not None else None
    request = AWSRequest(
        method=case["method"],
        url=url,
        data=body,
    )
    # HTTPHeaders keeps every value set under a name; botocore signs repeats joined by ",".
    for name, value in case.get("headers") or []:
        request.headers[name] = value
    # S3SigV4Auth replaces any X-Amz-Content-SHA256 header with its own payload(), which gives
    # UNSIGNED-PAYLOAD only when the S3 config turns payload signing off. Say it explicitly
    # both ways, so neither https nor a checksum header changes botocore's choice.
    request.context["client_config"] = types.SimpleNamespace(
        s3={"payload_signing_enabled": not case.get("unsigned_payload", False)}
    )
    credentials = Credentials(case["access_key"], case["secret_key"], case.get("token"))
    auth = botocore.auth.S3SigV4Auth(credentials, "s3", case["region"])
    # Keep the canonical request add_auth signs: computed afterwards it would take in the
    # Authorization header too.
    canonical = []
    compute = auth.canonical_request
    auth.canonical_request = lambda r: canonical.append(compute(r)) or canonical[-1]
    auth.add_auth(request)
    return {
        "url": url,
        "path": urlsplit(url).path,
        "canonical_request": canonical[-1],
        "headers": {name: request.headers[name] for name in ADDED if name in request.headers},
    }


def main():
    cases = json.load(sys.stdin)
    json.dump([sign(case) for case in cases], sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
