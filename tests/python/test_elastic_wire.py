"""The elastic driver's protocol (ringlet.runner.elastic_wire) over real
sockets: messages pass both ways; a wrong key, a message replayed on another
connection, one sent back the other way or out of order are refused; a
round's secret crosses sealed and arrives whole; the driver refuses a
stranger's connection, naming where it came from and why."""

import socket
import threading
import time

import pytest

from ringlet.runner import elastic_wire as wire

KEY = bytes(range(32))


def pair(key_driver=KEY, key_worker=KEY):
    """(driver side, worker side) of one connection over loopback."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    accepted = {}
    thread = threading.Thread(target=lambda: accepted.update(
        driver=wire.accept(listener.accept()[0], key_driver)))
    thread.start()
    worker = wire.connect(f"127.0.0.1:{listener.getsockname()[1]}", key_worker, timeout=5)
    thread.join()
    listener.close()
    return accepted["driver"], worker


def raw_line(connection, message):
    """The line `connection` would send for `message` (and counts it sent)."""
    sent = []
    real = connection.sock
    connection.sock = type("Capture", (), {"sendall": lambda self, data: sent.append(data)})()
    connection.send(message)
    connection.sock = real
    return sent[0]


def test_messages_pass_both_ways_and_the_secret_crosses_sealed():
    driver, worker = pair()
    worker.send({"op": "join", "after": 0})
    assert driver.receive() == {"op": "join", "after": 0}
    secret = "ab" * 32
    sealed = driver.seal(secret)
    assert sealed != secret and len(sealed) == len(secret)
    driver.send({"round": 1, "secret": sealed})
    reply = worker.receive()
    assert worker.unseal(reply["secret"]) == secret
    # The same secret sealed for the next message looks different again.
    assert driver.seal(secret) not in (sealed, secret)


def test_a_wrong_key_is_refused():
    driver, worker = pair(key_worker=bytes(32))
    worker.send({"op": "join", "after": 0})
    with pytest.raises(wire.WireError, match="job key"):
        driver.receive()


def test_a_message_replayed_on_another_connection_is_refused():
    driver, worker = pair()
    line = raw_line(worker, {"op": "join", "after": 0})
    other_driver, other_worker = pair()
    other_worker.sock.sendall(line)
    with pytest.raises(wire.WireError, match="recorded elsewhere"):
        other_driver.receive()


def test_a_message_sent_back_or_out_of_order_is_refused():
    driver, worker = pair()
    line = raw_line(worker, {"op": "updates", "since": 0})
    # Back to the worker as if the driver had said it.
    driver.sock.sendall(line)
    with pytest.raises(wire.WireError, match="recorded elsewhere"):
        worker.receive()
    # Twice to the driver: the second copy is out of its place.
    driver2, worker2 = pair()
    line = raw_line(worker2, {"op": "updates", "since": 0})
    worker2.sock.sendall(line + line)
    assert driver2.receive() == {"op": "updates", "since": 0}
    with pytest.raises(wire.WireError, match="recorded elsewhere"):
        driver2.receive()


def test_the_driver_refuses_a_stranger_and_says_who_and_why(capfd):
    from ringlet.runner import elastic_driver

    driver = elastic_driver.Driver(elastic_driver.Settings(np=1), discover=lambda: {},
                                   launcher=None, key=KEY)
    driver.serve("127.0.0.1")
    try:
        stranger = wire.connect(driver.driver_address, bytes(32), timeout=5)
        stranger.send({"op": "join", "after": 0, "worker": "h1:0"})
        # Refused: the driver closes the connection without an answer.
        with pytest.raises(wire.ConnectionClosed):
            stranger.receive()
        stranger.close()
        # A worker that leaves between messages is a goodbye, not a refusal.
        member = wire.connect(driver.driver_address, KEY, timeout=5)
        member.close()
        deadline = time.monotonic() + 5
        said = ""
        while "refused" not in said and time.monotonic() < deadline:
            time.sleep(0.05)
            said += capfd.readouterr().err
        time.sleep(0.3)  # time for a wrong line about the member to show
        said += capfd.readouterr().err
        assert said.count("refused the connection") == 1, said
        assert "refused the connection from 127.0.0.1: a message that failed the job key's " \
               "check" in said, said
    finally:
        driver.server.close()


def test_a_job_without_enough_usable_slots_says_how_many_it_saw():
    from ringlet.runner import elastic_driver

    settings = elastic_driver.Settings(np=2, start_timeout=0.3, discovery_interval=0.05)
    driver = elastic_driver.Driver(settings, discover=lambda: {"a": 1}, launcher=None, key=KEY)
    assert driver.run() == 1
    assert driver.outcome == ("host discovery reported 1 usable slots, fewer than -np 2, "
                              "for 0.3 s"), driver.outcome
