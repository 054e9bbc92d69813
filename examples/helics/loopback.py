"""A HELICS broker on a free loopback port, for the examples, their figures and the tests.

    from loopback import start_broker      # with examples/helics on sys.path, or loaded by path
    broker, address = start_broker(2)      # a zmq broker for two federates; address "127.0.0.1:PORT"
    ...
    helics.helicsBrokerDisconnect(broker)

HELICS's ZeroMQ broker binds its port P and P + 1 and hands each core that joins a port from P + 5 up,
without asking the machine whether it is free (docs/guides/helics.md). So P is drawn below the OS's
ephemeral range (where no connection's own port lands) with P .. P + 15 all free now; another program may
still take one first, so a broker that did not connect is dropped and another block tried (three tries).
"""

from __future__ import annotations

import random
import socket

import helics as h

BLOCK = 16  # the broker's port and the ports above it that its cores are handed


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS reports free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ephemeral_low() -> int:
    """The lowest port the OS hands out on its own (Linux's ip_local_port_range; 32768 elsewhere)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_block(n: int = BLOCK, tries: int = 200) -> int:
    """A port P below the ephemeral range with P .. P + n - 1 all free on 127.0.0.1 now."""
    high = max(_ephemeral_low(), 20000 + 2 * n) - n
    pick = random.SystemRandom()
    for _ in range(tries):
        port = pick.randrange(20000, high)
        if all(_is_free(port + k) for k in range(n)):
            return port
    return free_port()  # a crowded machine: the OS's choice, as before


def start_broker(n_federates: int = 2, tries: int = 3):
    """A connected zmq broker for ``n_federates`` on loopback and its ``"127.0.0.1:PORT"``.
    Disconnect it with ``helicsBrokerDisconnect`` (pyhelics frees it with the object: do not free it too)."""
    for _ in range(tries):
        port = free_block()
        broker = h.helicsCreateBroker("zmq", "", f"--federates={n_federates} --local_interface=127.0.0.1 "
                                                 f"--port={port} --loglevel=error")
        if h.helicsBrokerIsConnected(broker):
            return broker, f"127.0.0.1:{port}"
        h.helicsBrokerDisconnect(broker)
    raise RuntimeError(f"no HELICS broker connected on loopback after {tries} ports")
