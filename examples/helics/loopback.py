"""A HELICS broker on a free loopback port, for the examples, their figures and the tests.

    from loopback import start_broker      # with examples/helics on sys.path, or loaded by path
    broker, address = start_broker(2)      # a zmq broker for two federates; address "127.0.0.1:PORT"
    ...
    helics.helicsBrokerDisconnect(broker)

The port is one the OS reports free; another program may take it before the broker binds, so a broker that
did not connect is dropped and another port tried (three tries). HELICS's ZeroMQ core also opens ports a few
above the broker's without checking them (docs/guides/helics.md).
"""

from __future__ import annotations

import socket

import helics as h


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the OS reports free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_broker(n_federates: int = 2, tries: int = 3):
    """A connected zmq broker for ``n_federates`` on loopback and its ``"127.0.0.1:PORT"``.
    Disconnect it with ``helicsBrokerDisconnect`` (pyhelics frees it with the object: do not free it too)."""
    for _ in range(tries):
        port = free_port()
        broker = h.helicsCreateBroker("zmq", "", f"--federates={n_federates} --local_interface=127.0.0.1 "
                                                 f"--port={port} --loglevel=error")
        if h.helicsBrokerIsConnected(broker):
            return broker, f"127.0.0.1:{port}"
        h.helicsBrokerDisconnect(broker)
    raise RuntimeError(f"no HELICS broker connected on loopback after {tries} ports")
