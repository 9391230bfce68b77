"""The messages between an elastic job's driver (ringletrun with --min-np,
--max-np or --host-discovery-script) and its workers: one JSON object per
line over TCP.

The driver's key (RINGLET_ELASTIC_KEY, hex; it reaches each worker through
the agent's stdin, over ssh where the worker is on another host) protects
them: on each connection the driver first sends a fresh nonce; every message
after it carries an HMAC-SHA256, under the key, of its body, which holds that
nonce, its direction and its number on the connection. So nothing but the
job's own workers can ask for a place in it, and a message recorded on one
connection (or sent back the other way) is refused on any other. A round's
secret travels sealed: XORed with an HMAC of the nonce and the message's
number, so that someone watching the network does not learn it. A line that
fails a check ends the connection."""

import hashlib
import hmac
import json
import secrets
import socket

# The longest line either side accepts: a bound on what a wrong peer can make it hold.
MAX_LINE = 1 << 20

TO_DRIVER, TO_WORKER = "to-driver", "to-worker"


class WireError(RuntimeError):
    """The peer broke the protocol or the connection."""


class ConnectionClosed(WireError):
    """The peer closed the connection (between messages: a clean goodbye)."""


class Connection:
    """One side of a connection: send() a message, receive() the next."""

    def __init__(self, sock, key, nonce, sends, reader=None):
        self.sock = sock
        self.key = key
        self.nonce = nonce
        self.sends = sends                  # this side's direction
        self.receives = TO_WORKER if sends == TO_DRIVER else TO_DRIVER
        self.sent = 0                       # messages sent, and so the next one's number
        self.received = 0
        self.reader = reader or sock.makefile("rb")

    def send(self, message):
        body = json.dumps(dict(message, nonce=self.nonce, dir=self.sends, seq=self.sent),
                          separators=(",", ":"))
        mac = hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest()
        self.sock.sendall((json.dumps({"body": body, "mac": mac}) + "\n").encode())
        self.sent += 1

    def receive(self):
        line = self._line()
        try:
            outer = json.loads(line)
            body, mac = outer["body"], outer["mac"]
            want = hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest()
        except (ValueError, KeyError, TypeError, AttributeError):
            raise WireError("a message that is not the elastic driver's protocol") from None
        if not isinstance(mac, str) or not hmac.compare_digest(mac, want):
            raise WireError("a message that failed the job key's check")
        message = json.loads(body)
        if (message.pop("nonce", None), message.pop("dir", None), message.pop("seq", None)) != \
                (self.nonce, self.receives, self.received):
            raise WireError("a message recorded elsewhere (another connection, direction or "
                            "place in this one)")
        self.received += 1
        return message

    def seal(self, secret_hex):
        """`secret_hex` (32 bytes) as the next message sent carries it."""
        return self._mask(secret_hex, self.sends, self.sent)

    def unseal(self, sealed_hex):
        """A secret the last message received carried, as it was sealed."""
        return self._mask(sealed_hex, self.receives, self.received - 1)

    def close(self):
        # Shut down first: a thread blocked in receive() wakes (to a closed
        # connection) instead of holding the reader that close() needs.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.reader.close()
        finally:
            self.sock.close()

    def _mask(self, value_hex, direction, seq):
        value = bytes.fromhex(value_hex)
        pad = hmac.new(self.key, f"seal:{self.nonce}:{direction}:{seq}".encode(),
                       hashlib.sha256).digest()
        if len(value) > len(pad):
            raise ValueError("only secrets of up to 32 bytes are sealed")
        return bytes(a ^ b for a, b in zip(value, pad)).hex()

    def _line(self):
        line = self.reader.readline(MAX_LINE + 1)
        if not line:
            raise ConnectionClosed("the connection closed")
        if len(line) > MAX_LINE or not line.endswith(b"\n"):
            raise WireError("a message longer than the protocol allows")
        return line


def accept(sock, key):
    """The driver's side of a connection a worker opened: sends the nonce."""
    nonce = secrets.token_hex(16)
    sock.sendall((json.dumps({"nonce": nonce}) + "\n").encode())
    return Connection(sock, key, nonce, TO_WORKER)


def connect(address, key, timeout):
    """A worker's Connection to the driver at host:port, or WireError naming it."""
    host, _, port = address.rpartition(":")
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        reader = sock.makefile("rb")
        nonce = json.loads(reader.readline(256))["nonce"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise WireError(f"the elastic driver at {address} did not answer: {e}") from None
    if not isinstance(nonce, str) or len(nonce) != 32:
        raise WireError(f"the elastic driver at {address} sent no nonce")
    sock.settimeout(None)
    return Connection(sock, key, nonce, TO_DRIVER, reader)
