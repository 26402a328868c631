"""error_cb and logger: programs written for confluent-kafka, run on confluent-kafka and on kproducer.compat.

A broker nobody listens for is a port closed before the program starts. Both clients
report each broker when it goes down and every broker down once; the tests compare the
codes seen (not how many times, nor when), wait with polling loops and generous
deadlines, and check that error_cb runs on the thread calling poll().
"""

from __future__ import annotations

import importlib
import logging
import socket
import threading
import time
from types import ModuleType
from typing import Any

import pytest

from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker

MODULES = ("confluent_kafka", "kproducer.compat.confluent_kafka")
_DEADLINE_S = 60.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once the socket is closed


def _on_both(program: Any, *args: Any) -> tuple[Any, Any]:
    theirs, ours = (program(importlib.import_module(module), *args) for module in MODULES)
    return theirs, ours


# ----------------------------------------------------------------------------- error_cb


def unreachable_program(ck: ModuleType, bootstrap: str) -> dict[str, Any]:
    caller = threading.get_ident()
    codes: set[str] = set()
    details: set[tuple[bool, bool, bool]] = set()

    def error_cb(err: Any) -> None:
        codes.add(err.name())
        details.add((isinstance(err, ck.KafkaError), err.fatal(), threading.get_ident() == caller))

    p = ck.Producer({"bootstrap.servers": bootstrap, "error_cb": error_cb})
    deadline = time.monotonic() + _DEADLINE_S
    while not {"_TRANSPORT", "_ALL_BROKERS_DOWN"} <= codes and time.monotonic() < deadline:
        p.poll(0.1)
    p.close()
    return {"codes": codes, "details": details}


def test_error_cb_hears_an_unreachable_broker_and_all_brokers_down() -> None:
    bootstrap = f"127.0.0.1:{_closed_port()}"
    theirs, ours = _on_both(unreachable_program, bootstrap)
    assert theirs == ours
    assert ours == {"codes": {"_TRANSPORT", "_ALL_BROKERS_DOWN"}, "details": {(True, False, True)}}


def one_down_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    """One bootstrap server up, one down: the dead one is reported, not every broker; records are delivered."""
    codes: set[str] = set()
    delivered: list[int] = []

    def on_delivery(err: Any, msg: Any) -> None:
        delivered.append(msg.offset() if err is None else -1)

    p = ck.Producer({"bootstrap.servers": bootstrap, "error_cb": lambda err: codes.add(err.name())})
    for i in range(5):
        p.produce(topic, f"v{i}".encode(), on_delivery=on_delivery)
    left = p.flush(_DEADLINE_S)
    deadline = time.monotonic() + _DEADLINE_S
    while "_TRANSPORT" not in codes and time.monotonic() < deadline:
        p.poll(0.1)
    p.close()
    return {"codes": codes, "delivered": sorted(delivered), "left": left}


def test_error_cb_reports_the_dead_bootstrap_server_while_records_flow(tansu: TansuBroker, topic_name: str) -> None:
    results = []
    for module in MODULES:
        topic = f"{topic_name}-{'ck' if module == 'confluent_kafka' else 'kp'}"
        create_topic(tansu.bootstrap, topic, 1)
        # The dead server first: both clients try it, fail, and still reach the live one.
        bootstrap = f"127.0.0.1:{_closed_port()},{tansu.bootstrap}"
        results.append(one_down_program(importlib.import_module(module), bootstrap, topic))
    theirs, ours = results
    assert "_TRANSPORT" in theirs["codes"] and "_TRANSPORT" in ours["codes"]
    assert "_ALL_BROKERS_DOWN" not in ours["codes"]
    assert theirs["delivered"] == ours["delivered"] == [0, 1, 2, 3, 4]
    assert theirs["left"] == ours["left"] == 0


def raising_error_cb_program(ck: ModuleType, bootstrap: str) -> dict[str, Any]:
    raised: list[str] = []

    def error_cb(err: Any) -> None:
        raise ValueError(f"error_cb failed on {err.name()}")

    p = ck.Producer({"bootstrap.servers": bootstrap, "error_cb": error_cb})
    deadline = time.monotonic() + _DEADLINE_S
    while not raised and time.monotonic() < deadline:
        try:
            p.poll(0.1)
        except ValueError as e:
            raised.append(str(e))
    try:
        p.close()
    except ValueError:
        pass  # error_cb raised again for an error served while closing
    return {"raised": raised[:1]}


def test_an_exception_raised_by_error_cb_is_raised_from_poll() -> None:
    bootstrap = f"127.0.0.1:{_closed_port()}"
    theirs, ours = _on_both(raising_error_cb_program, bootstrap)
    assert theirs == ours == {"raised": ["error_cb failed on _TRANSPORT"]}


def test_error_cb_is_served_by_flush_too() -> None:
    from kproducer.compat.confluent_kafka import KafkaError, Producer

    codes: set[int] = set()
    p = Producer({"bootstrap.servers": f"127.0.0.1:{_closed_port()}", "error_cb": lambda e: codes.add(e.code())})
    p.produce("nowhere", b"v")
    deadline = time.monotonic() + _DEADLINE_S
    while KafkaError._ALL_BROKERS_DOWN not in codes and time.monotonic() < deadline:
        p.flush(0.1)
    assert codes == {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
    p.purge()
    p.close(0)


# ----------------------------------------------------------------------------- logger


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_logger_receives_kproducers_log_lines_while_the_producer_is_open(tansu: TansuBroker, topic_name: str) -> None:
    from kproducer.compat.confluent_kafka import Producer

    create_topic(tansu.bootstrap, topic_name, 1)
    app = logging.getLogger(f"app.{topic_name}")
    app.setLevel(logging.DEBUG)
    app.propagate = False
    handler = _Records()
    app.addHandler(handler)
    bootstrap = f"127.0.0.1:{_closed_port()},{tansu.bootstrap}"
    p = Producer({"bootstrap.servers": bootstrap, "logger": app})
    p.produce(topic_name, b"v0")
    assert p.flush(_DEADLINE_S) == 0
    deadline = time.monotonic() + _DEADLINE_S
    while not any("is unreachable" in r.getMessage() for r in handler.records) and time.monotonic() < deadline:
        p.poll(0.1)
    lines = [(r.name, r.levelno, r.getMessage()) for r in handler.records]
    assert any(
        name == "kproducer.network.client" and level == logging.WARNING and "is unreachable" in message
        for name, level, message in lines
    ), lines
    p.close()
    forwarded = len(handler.records)
    logging.getLogger("kproducer.network.client").warning("after close")
    assert len(handler.records) == forwarded  # no longer forwarded
    assert [r.value for r in read_topic(tansu.bootstrap, topic_name, 1)] == [b"v0"]


def test_a_logger_adapter_adds_its_context(tansu: TansuBroker) -> None:
    from kproducer.compat.confluent_kafka import Producer

    app = logging.getLogger("app.adapter")
    app.propagate = False
    handler = _Records()
    app.addHandler(handler)
    p = Producer({"bootstrap.servers": tansu.bootstrap, "logger": logging.LoggerAdapter(app, {"service": "orders"})})
    try:
        logging.getLogger("kproducer.producer").warning("a kproducer line")
    finally:
        p.close()
    assert [(r.getMessage(), getattr(r, "service", None)) for r in handler.records if r.getMessage() == "a kproducer line"] == [
        ("a kproducer line", "orders")
    ]


@pytest.mark.parametrize("bad", ["kafka", print, 3])
def test_logger_that_is_not_a_logger_is_refused_by_name(tansu: TansuBroker, bad: Any) -> None:
    from kproducer.compat.confluent_kafka import KafkaError, KafkaException, Producer

    with pytest.raises(KafkaException, match="logger must be a logging.Logger or logging.LoggerAdapter") as e:
        Producer({"bootstrap.servers": tansu.bootstrap, "logger": bad})
    assert e.value.args[0].code() == KafkaError._INVALID_ARG
