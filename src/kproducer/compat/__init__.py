"""Adapters that run a program written for another Python Kafka client on kproducer, with one import changed.

Each adapter is a thin layer over the one :class:`kproducer.Producer` (or
:class:`kproducer.aio.AsyncProducer`): it translates names, argument shapes,
configuration and errors, and adds nothing to the record path. See
``docs/migrating.md`` for what each one maps, and what it refuses and why.

- :mod:`kproducer.compat.confluent_kafka`: confluent-kafka's ``Producer`` and
  ``SerializingProducer``.
- :mod:`kproducer.compat.aiokafka`: aiokafka's ``AIOKafkaProducer`` and its ``errors``.
- :mod:`kproducer.compat.kafka`: kafka-python's ``KafkaProducer`` and its ``errors``.
"""
