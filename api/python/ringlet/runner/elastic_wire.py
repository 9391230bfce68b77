"""The messages between an elastic job's driver (ringletrun with --min-np,
--max-np or --host-discovery-script) and its workers: one JSON object per
line, each carrying an HMAC-SHA256 of its body under the driver's key
(RINGLET_ELASTIC_KEY, hex), so that nothing but the job's own workers can
ask for a place in it or learn a round's secret. A line that fails the check
ends the connection."""

import hashlib
import hmac
import json
import socket

# The longest line either side accepts: a bound on what a wrong peer can make it hold.
MAX_LINE = 1 << 20


class WireError(RuntimeError):
    """The peer broke the protocol or the connection."""


def encode(key, message):
    body = json.dumps(message, separators=(",", ":"))
    mac = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    return (json.dumps({"body": body, "mac": mac}, separators=(",", ":")) + "\n").encode()


def decode(key, line):
    try:
        outer = json.loads(line)
        body, mac = outer["body"], outer["mac"]
    except (ValueError, KeyError, TypeError):
        raise WireError("a message that is not the elastic driver's protocol") from None
    want = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    if not isinstance(mac, str) or not hmac.compare_digest(mac, want):
        raise WireError("a message that failed the job key's check")
    return json.loads(body)


class Connection:
    """One side of a connection: send() a message, receive() the next."""

    def __init__(self, sock, key):
        self.sock = sock
        self.key = key
        self.reader = sock.makefile("rb")

    def send(self, message):
        self.sock.sendall(encode(self.key, message))

    def receive(self):
        line = self.reader.readline(MAX_LINE + 1)
        if not line:
            raise WireError("the connection closed")
        if len(line) > MAX_LINE or not line.endswith(b"\n"):
            raise WireError("a message longer than the protocol allows")
        return decode(self.key, line)

    def close(self):
        try:
            self.reader.close()
        finally:
            self.sock.close()


def connect(address, key, timeout):
    """A Connection to the driver at host:port, or WireError naming it."""
    host, _, port = address.rpartition(":")
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    except OSError as e:
        raise WireError(f"the elastic driver at {address} did not answer: {e}") from None
    sock.settimeout(None)
    return Connection(sock, key)
