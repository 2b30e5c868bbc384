"""What the loopback test doubles share: announcing the port they listen on, then serving."""

import os


def serve(server, port_file):
    """Writes the port `server` listens on to `port_file` (whole, by a rename), then serves until killed."""
    temporary = port_file + ".tmp"
    with open(temporary, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(temporary, port_file)
    server.serve_forever()
