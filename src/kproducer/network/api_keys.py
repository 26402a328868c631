"""Kafka API keys and coordinator key types: plain constants, importable without the protocol schemas.

Java's ``org.apache.kafka.common.protocol.ApiKeys`` numbers (the Kafka protocol
guide lists them). They live apart from :mod:`kproducer.network.protocol`, which
loads kio's schemas (and with them ``asyncio``), so that code naming a request
type, such as the transaction manager, does not pay for the schemas at
``import kproducer``.
"""

from __future__ import annotations

import enum

__all__ = ["ApiKey", "COORDINATOR_KEY_GROUP", "COORDINATOR_KEY_TRANSACTION"]


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    METADATA = 3
    FIND_COORDINATOR = 10
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    SASL_AUTHENTICATE = 36


# FindCoordinator's key_type (KIP-98): a consumer group, or a transactional id.
COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1
