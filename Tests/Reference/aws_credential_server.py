#!/usr/bin/env python3
"""A stand-in, on loopback, for the services that hand out AWS credentials.

Used by Tests/WinBackSlowTests/S3 to prove each way winback's credential chain finds keys. One
server answers as all three (pick with the environment variables given to winback):

- the ECS / AWS Batch container endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1:P/creds):
  GET /creds -> {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}; with
  --authorization, a request without that exact Authorization header gets 401.
- STS for EKS web identity (AWS_ENDPOINT_URL_STS=http://127.0.0.1:P/): POST / with the form
  Action=AssumeRoleWithWebIdentity, RoleArn, RoleSessionName, WebIdentityToken -> an
  AssumeRoleWithWebIdentityResponse; a wrong token or role gets 403 AccessDenied.
- the EC2 instance metadata service, IMDSv2 only (AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:P):
  PUT /latest/api/token (needs X-aws-ec2-metadata-token-ttl-seconds) -> a session token;
  GET /latest/meta-data/iam/security-credentials/ -> the role's name, and GET
  /latest/meta-data/iam/security-credentials/<role> -> its credentials. Both GETs need the
  session token in X-aws-ec2-metadata-token: without it, or with another, 401 (IMDSv1 is off).

    aws_credential_server.py --port-file PORT --log LOG --access-key K --secret-key S
        [--session-token T] [--authorization A] [--web-identity-token W] [--role-arn R]
        [--role-name NAME]

Without --session-token the credentials carry no session token (the Token field and the
SessionToken element are left out): an S3 server that knows only long-term keys, as SeaweedFS
does, refuses requests that carry a token it did not issue.

--log gets one JSON object per line: {"method", "path", "status", "authorization",
"imds_token_sent", "imds_token_valid", "form"} of every request.
"""

import argparse
import datetime
import json
import os
import secrets
import signal
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loopback  # noqa: E402  (the port file and serving, shared with the other doubles)

CREDENTIALS_PATH = "/latest/meta-data/iam/security-credentials/"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and
    # the client's delayed ACK hold each answer back for tens of milliseconds.
    disable_nagle_algorithm = True

    def log_message(self, format, *args):
        pass

    def record(self, status, **fields):
        server = self.server
        entry = {
            "method": self.command,
            "path": self.path,
            "status": status,
            "authorization": self.headers.get("Authorization"),
        }
        entry.update(fields)
        with server.lock:
            server.log.write(json.dumps(entry, sort_keys=True) + "\n")
            server.log.flush()

    def answer(self, status, body, content_type="text/plain"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def expiration(self):
        moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    def credentials_json(self):
        o = self.server.options
        body = {
            "Code": "Success",
            "Type": "AWS-HMAC",
            "AccessKeyId": o.access_key,
            "SecretAccessKey": o.secret_key,
            "Expiration": self.expiration(),
        }
        if o.session_token:
            body["Token"] = o.session_token
        return json.dumps(body)

    def imds_token(self):
        sent = self.headers.get("X-aws-ec2-metadata-token")
        with self.server.lock:
            valid = sent is not None and sent in self.server.imds_tokens
        return sent is not None, valid

    def do_PUT(self):
        self.drain()
        if self.path != "/latest/api/token":
            self.record(404)
            return self.answer(404, "not found")
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        if not ttl or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            self.record(400, ttl=ttl)
            return self.answer(400, "X-aws-ec2-metadata-token-ttl-seconds must be 1-21600")
        token = secrets.token_urlsafe(24)
        with self.server.lock:
            self.server.imds_tokens.add(token)
        self.record(200, ttl=ttl)
        self.answer(200, token)

    def do_GET(self):
        o = self.server.options
        if self.path.startswith("/creds"):
            if o.authorization is not None and self.headers.get("Authorization") != o.authorization:
                self.record(401)
                return self.answer(401, "unauthorized")
            self.record(200)
            return self.answer(200, self.credentials_json(), "application/json")
        if self.path.startswith(CREDENTIALS_PATH):
            sent, valid = self.imds_token()
            if not valid:
                self.record(401, imds_token_sent=sent, imds_token_valid=False)
                return self.answer(401, "")
            role = self.path[len(CREDENTIALS_PATH) :]
            if role == "":
                self.record(200, imds_token_sent=True, imds_token_valid=True)
                return self.answer(200, o.role_name)
            if role != o.role_name:
                self.record(404, imds_token_sent=True, imds_token_valid=True)
                return self.answer(404, "not found")
            self.record(200, imds_token_sent=True, imds_token_valid=True)
            return self.answer(200, self.credentials_json(), "application/json")
        self.record(404)
        self.answer(404, "not found")

    def do_POST(self):
        o = self.server.options
        body = self.drain().decode()
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}
        logged = {k: v for k, v in form.items()}
        if form.get("Action") != "AssumeRoleWithWebIdentity":
            self.record(400, form=logged)
            return self.answer(400, "unknown action")
        if form.get("WebIdentityToken") != o.web_identity_token or form.get("RoleArn") != o.role_arn:
            self.record(403, form=logged)
            error = (
                '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
                "<Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity"
                "</Message></Error></ErrorResponse>"
            )
            return self.answer(403, error, "text/xml")
        token = (
            "<SessionToken>%s</SessionToken>" % escape(o.session_token) if o.session_token else ""
        )
        xml = (
            '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleWithWebIdentityResult>"
            "<SubjectFromWebIdentityToken>system:serviceaccount:winback:winback</SubjectFromWebIdentityToken>"
            "<AssumedRoleUser><Arn>%s/%s</Arn><AssumedRoleId>AROATEST:%s</AssumedRoleId></AssumedRoleUser>"
            "<Credentials>%s<SecretAccessKey>%s</SecretAccessKey><Expiration>%s</Expiration>"
            "<AccessKeyId>%s</AccessKeyId></Credentials>"
            "<Audience>sts.amazonaws.com</Audience>"
            "</AssumeRoleWithWebIdentityResult>"
            "<ResponseMetadata><RequestId>00000000-0000-0000-0000-000000000000</RequestId></ResponseMetadata>"
            "</AssumeRoleWithWebIdentityResponse>"
        ) % (
            escape(o.role_arn or ""),
            escape(form.get("RoleSessionName", "")),
            escape(form.get("RoleSessionName", "")),
            token,
            escape(o.secret_key),
            self.expiration(),
            escape(o.access_key),
        )
        self.record(200, form=logged)
        self.answer(200, xml, "text/xml")

    def drain(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""


def main():
    # A parent may start this with signals blocked (a test runner's thread mask is inherited):
    # stopping by SIGTERM must work.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--access-key", required=True)
    parser.add_argument("--secret-key", required=True)
    parser.add_argument("--session-token", default=None)
    parser.add_argument("--authorization", default=None)
    parser.add_argument("--web-identity-token", default=None)
    parser.add_argument("--role-arn", default=None)
    parser.add_argument("--role-name", default="winback-test-role")
    options = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    server.daemon_threads = True
    server.options = options
    server.lock = threading.Lock()
    server.imds_tokens = set()
    server.log = open(options.log, "a", encoding="utf-8")
    loopback.serve(server, options.port_file)


if __name__ == "__main__":
    main()
