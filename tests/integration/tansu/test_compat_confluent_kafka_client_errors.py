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

from tests.support.readback import create_topic
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
    """One bootstrap server up, one down: records are delivered, every broker is never reported down."""
    codes: set[str] = set()
    delivered: list[int] = []

    def on_delivery(err: Any, msg: Any) -> None:
        delivered.append(msg.offset() if err is None else -1)

    p = ck.Producer({"bootstrap.servers": bootstrap, "error_cb": lambda err: codes.add(err.name())})
    for i in range(5):
        p.produce(topic, f"v{i}".encode(), on_delivery=on_delivery)
    left = p.flush(_DEADLINE_S)
    # Neither client needs every bootstrap server (librdkafka connects sparsely; kproducer, as the
    # Java producer, only until one answers): the dead one is reported if it happened to be tried.
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        p.poll(0.1)
    p.close()
    return {"codes": codes, "delivered": sorted(delivered), "left": left}


def test_error_cb_reports_no_all_brokers_down_while_one_broker_is_up(tansu: TansuBroker, topic_name: str) -> None:
    results = []
    for module in MODULES:
        topic = f"{topic_name}-{'ck' if module == 'confluent_kafka' else 'kp'}"
        create_topic(tansu.bootstrap, topic, 1)
        # The dead server first: both clients try it, fail, and still reach the live one.
        bootstrap = f"127.0.0.1:{_closed_port()},{tansu.bootstrap}"
        results.append(one_down_program(importlib.import_module(module), bootstrap, topic))
    theirs, ours = results
    # Never "all brokers down" while one is up; the dead one, if tried, is a _TRANSPORT error.
    assert theirs["codes"] <= {"_TRANSPORT"} and ours["codes"] <= {"_TRANSPORT"}
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


def test_a_fatal_error_is_raised_once_from_poll(tansu: TansuBroker, topic_name: str) -> None:
    # Adapter only: confluent-kafka raises KafkaException (the underlying error, fatal() true) from
    # poll() for librdkafka's _FATAL event instead of calling error_cb; on Tansu its fenced producer
    # is not made fatal (it reports PRODUCER_FENCED as not fatal), so there is nothing to compare.
    from kproducer.compat.confluent_kafka import KafkaError, KafkaException, Producer

    create_topic(tansu.bootstrap, topic_name, 1)
    errors: list[Any] = []
    conf = {"bootstrap.servers": tansu.bootstrap, "transactional.id": f"tx-{topic_name}", "error_cb": errors.append}
    fenced = Producer(conf)
    fenced.init_transactions(_DEADLINE_S)
    fenced.begin_transaction()
    fenced.produce(topic_name, b"a")
    assert fenced.flush(_DEADLINE_S) == 0
    newer = Producer(conf)
    newer.init_transactions(_DEADLINE_S)
    reports: list[Any] = []
    fenced.produce(topic_name, b"b", on_delivery=lambda err, msg: reports.append(err))
    raised: list[KafkaException] = []
    deadline = time.monotonic() + _DEADLINE_S
    while not raised and time.monotonic() < deadline:
        try:
            fenced.poll(0.1)
        except KafkaException as e:
            raised.append(e)
    assert len(raised) == 1
    err = raised[0].args[0]
    assert err.fatal() and err.code() == KafkaError.PRODUCER_FENCED
    assert [e.code() for e in reports] == [KafkaError.PRODUCER_FENCED]
    assert fenced.poll(0) == 0  # raised once; error_cb is not called for it
    assert errors == []
    with pytest.raises(KafkaException) as later:
        fenced.produce(topic_name, b"c")
    assert later.value.args[0].fatal()
    fenced.close(0)
    newer.close()


# ----------------------------------------------------------------------------- logger


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_logger_receives_kproducers_log_lines_while_the_producer_is_open(topic_name: str) -> None:
    from kproducer.compat.confluent_kafka import Producer

    app = logging.getLogger(f"app.{topic_name}")
    app.setLevel(logging.DEBUG)
    app.propagate = False
    handler = _Records()
    app.addHandler(handler)
    p = Producer({"bootstrap.servers": f"127.0.0.1:{_closed_port()}", "logger": app})
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
    assert all(isinstance(h, logging.NullHandler) for h in logging.getLogger("kproducer").handlers)


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
