"""The embedded broker's former import path: it lives in :mod:`kproducer.embedded_broker` (nothing
in it is Spark's), and this name stays importable for code written against it."""

from kproducer.embedded_broker import EmbeddedBroker, free_port, start_embedded_broker, tansu_binary

__all__ = ["EmbeddedBroker", "free_port", "start_embedded_broker", "tansu_binary"]
