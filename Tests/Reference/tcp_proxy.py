#!/usr/bin/env python3
"""A TCP proxy on loopback that fails like a network: it forwards every connection to
--target and, once --after bytes came from the server on a connection, either closes both
sides (--mode cut: a server gone mid-read) or stops forwarding and holds the connection open
(--mode silent: a server that stops answering). Writes its port to --port-file, then runs
until killed."""
import argparse
import os
import socket
import sys
import threading


def pipe(src, dst, limit, mode, state):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if limit is not None:
                left = limit - state["sent"]
                if len(data) >= left:
                    dst.sendall(data[:max(left, 0)])
                    state["sent"] = limit
                    if mode == "cut":
                        for s in (src, dst):
                            try:
                                s.shutdown(socket.SHUT_RDWR)
                            except OSError:
                                pass
                            s.close()
                        return
                    # silent: swallow everything from now on, answer nothing.
                    while src.recv(65536):
                        pass
                    return
                state["sent"] += len(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        if mode != "silent":
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--after", type=int, required=True)
    ap.add_argument("--mode", choices=["cut", "silent"], required=True)
    ap.add_argument("--port-file", required=True)
    a = ap.parse_args()
    host, port = a.target.rsplit(":", 1)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(a.port_file + ".tmp", a.port_file)
    while True:
        client, _ = listener.accept()
        server = socket.create_connection((host, int(port)))
        state = {"sent": 0}
        # Client to server untouched; server to client counted.
        threading.Thread(target=pipe, args=(client, server, None, "plain", state), daemon=True).start()
        threading.Thread(target=pipe, args=(server, client, a.after, a.mode, state), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
