"""The adapters' exception names against the installed aiokafka and kafka-python: every name those
clients export exists, every broker error code maps to the class the peer uses for it, and each
translated exception is both the peer-named class and kproducer's own."""

from __future__ import annotations

import pickle

# The peers are test dependencies (pyproject's test extra): missing, this module fails to import.
import aiokafka.errors as aiokafka_errors  # noqa: E402
import kafka.errors as kafka_python_errors  # noqa: E402
import pytest

from kproducer import errors as kerrors
from kproducer.compat.aiokafka import errors as aio_errors
from kproducer.compat.kafka import errors as kafka_errors


def _exception_names(module: object) -> set[str]:
    return {
        name for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseException) and not name.startswith("_")
        and value.__module__ == getattr(module, "__name__", None)
    }


@pytest.mark.parametrize(("ours", "theirs"), [(aio_errors, aiokafka_errors), (kafka_errors, kafka_python_errors)])
def test_every_exception_name_of_the_peer_exists(ours: object, theirs: object) -> None:
    missing = sorted(n for n in _exception_names(theirs) if not hasattr(ours, n))
    assert not missing


@pytest.mark.parametrize(("ours", "theirs"), [(aio_errors, aiokafka_errors), (kafka_errors, kafka_python_errors)])
def test_the_peers_class_hierarchy_is_kept(ours: object, theirs: object) -> None:
    for name in _exception_names(theirs):
        peer_cls = getattr(theirs, name)
        for base in peer_cls.__mro__[1:]:
            if base.__module__ == peer_cls.__module__ and hasattr(ours, base.__name__):
                assert issubclass(getattr(ours, name), getattr(ours, base.__name__)), (name, base.__name__)


# Codes whose ``retriable`` flag the peer sets otherwise than the Java client's Errors table, which
# kproducer keeps (it is what kproducer retried on before the error reached the program).
_RETRIABLE_DIFFERS = {"aiokafka.errors": {2, 9, 51, 70, 71, 72}, "kafka.errors": {2}}


@pytest.mark.parametrize(("ours", "theirs"), [(aio_errors, aiokafka_errors), (kafka_errors, kafka_python_errors)])
def test_each_broker_error_code_becomes_the_peers_class(ours: object, theirs: object) -> None:
    checked = 0
    differs = set()
    by_code = {
        cls.errno: cls for cls in vars(theirs).values()
        if isinstance(cls, type) and isinstance(getattr(cls, "errno", None), int) and cls.__module__ == theirs.__name__
        and "errno" in cls.__dict__
    }
    for code, peer_cls in by_code.items():
        kclass = kerrors.error_class_for_code(code)
        if kclass is kerrors.UnknownServerError and code != -1:
            continue  # a code kproducer has no class for: it never raises it
        if code == 13 and theirs is aiokafka_errors:
            # aiokafka names code 13 by its pre-1.0 meaning; NETWORK_EXCEPTION is its KafkaConnectionError.
            assert type(ours.translate(kerrors.error_for_code(13))) is aio_errors.KafkaConnectionError
            continue
        translated = ours.translate(kerrors.error_for_code(code, topic="t", partition=1))  # type: ignore[attr-defined]
        assert type(translated).__name__ == peer_cls.__name__, code
        assert translated.errno == code
        assert isinstance(translated, kclass)
        if bool(translated.retriable) != bool(peer_cls.retriable):
            differs.add(code)
        checked += 1
    assert checked > 60
    assert differs == _RETRIABLE_DIFFERS[theirs.__name__]  # type: ignore[attr-defined]


def test_client_side_errors_take_the_peers_names() -> None:
    cases = [
        (kerrors.ProducerClosedError("closed"), aio_errors.ProducerClosed, kafka_errors.IllegalStateError),
        (kerrors.IllegalStateError("state"), aio_errors.IllegalOperation, kafka_errors.IllegalStateError),
        (kerrors.BufferExhaustedError("full"), aio_errors.KafkaTimeoutError, kafka_errors.KafkaTimeoutError),
        (kerrors.KafkaTimeoutError("late"), aio_errors.KafkaTimeoutError, kafka_errors.KafkaTimeoutError),
        (kerrors.ConfigError("bad"), aio_errors.KafkaConfigurationError, kafka_errors.KafkaConfigurationError),
        (kerrors.TransactionAbortedError("gone"), aio_errors.KafkaError, kafka_errors.TransactionAbortedError),
        (kerrors.ProducerFencedError("fenced"), aio_errors.ProducerFenced, kafka_errors.ProducerFencedError),
    ]
    for error, aio_cls, kafka_cls in cases:
        for ours, cls in ((aio_errors, aio_cls), (kafka_errors, kafka_cls)):
            translated = ours.translate(error)
            assert type(translated) is cls, (error, cls)
            assert translated.__cause__ is error and translated.message == error.message
    # IllegalOperation is also aiokafka's IllegalStateError, and both are KafkaErrors here.
    assert issubclass(aio_errors.IllegalOperation, aio_errors.IllegalStateError)


def test_translation_keeps_topic_partition_and_pickles() -> None:
    error = kafka_errors.translate(kerrors.NotLeaderOrFollowerError("moved", topic="orders", partition=3))
    assert (error.topic, error.partition, error.message) == ("orders", 3, "moved")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is kafka_errors.NotLeaderForPartitionError and again.topic == "orders"
    # Not kproducer's: passed through untouched.
    plain = ValueError("x")
    assert kafka_errors.translate(plain) is plain
    assert kafka_errors.translate(error) is error


@pytest.mark.parametrize(("ours", "theirs"), [(aio_errors, aiokafka_errors), (kafka_errors, kafka_python_errors)])
def test_with_the_peer_installed_its_own_except_clauses_catch_the_adapters_errors(ours: object, theirs: object) -> None:
    # A program that keeps `from aiokafka.errors import ...` (it still consumes with aiokafka, say)
    # catches what the adapter raises.
    for name in _exception_names(theirs):
        assert issubclass(getattr(ours, name), getattr(theirs, name)), name
    error = ours.translate(kerrors.RecordTooLargeError("too big"))  # type: ignore[attr-defined]
    try:
        raise error
    except theirs.MessageSizeTooLargeError as caught:  # type: ignore[attr-defined]
        assert caught is error


def test_the_adapters_work_without_the_peer_installed() -> None:
    import subprocess
    import sys

    probe = (
        "import sys; sys.modules['aiokafka'] = None; sys.modules['kafka'] = None\n"
        "from kproducer import errors as ke\n"
        "from kproducer.compat.aiokafka import AIOKafkaProducer, errors as a\n"
        "from kproducer.compat.kafka import KafkaProducer, errors as k\n"
        "e = a.translate(ke.RecordTooLargeError('x')); assert type(e).__name__ == 'MessageSizeTooLargeError'\n"
        "e = k.translate(ke.RecordTooLargeError('x')); assert isinstance(e, k.BrokerResponseError)\n"
        "assert 'aiokafka.errors' not in sys.modules or sys.modules['aiokafka.errors'] is None\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
