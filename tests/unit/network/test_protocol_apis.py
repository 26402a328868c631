"""FindCoordinator, AddPartitionsToTxn and EndTxn through the project's framing, every client version.

Requests are built with the protocol builders, framed by ``encode_request`` and read back
with kio's own header and body readers (an independent decoder). Responses are written
with kio's writers and read by ``decode_response_header`` / ``decode_response``.
"""

from __future__ import annotations

import datetime
import io
import struct
import sys
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kproducer.network import protocol
from kproducer.network.protocol import CLIENT_VERSIONS, ApiKey, ProtocolError
from kproducer.structs import TopicPartition

# First flexible version of each API, from Kafka's message specs ("flexibleVersions": "3+").
FIRST_FLEXIBLE = {ApiKey.FIND_COORDINATOR: 3, ApiKey.ADD_PARTITIONS_TO_TXN: 3, ApiKey.END_TXN: 3}
APIS = tuple(FIRST_FLEXIBLE)
CASES = [(k, v) for k in APIS for v in range(CLIENT_VERSIONS[k][0], CLIENT_VERSIONS[k][1] + 1)]
CLIENT_ID = "txn-client"
CORRELATION_ID = 0x1234_5678
TXN_PARTITIONS = (TopicPartition("orders", 0), TopicPartition("orders", 4), TopicPartition("audit", 1))


def _ids(case: tuple[ApiKey, int]) -> str:
    return f"{case[0].name}-v{case[1]}"


def _request(api_key: ApiKey, version: int) -> Any:
    if api_key == ApiKey.FIND_COORDINATOR:
        key_type = protocol.COORDINATOR_KEY_GROUP if version == 0 else protocol.COORDINATOR_KEY_TRANSACTION
        return protocol.build_find_coordinator_request(version, "txn-1", key_type)
    if api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
        return protocol.build_add_partitions_to_txn_request(version, "txn-1", 4000, 7, TXN_PARTITIONS)
    return protocol.build_end_txn_request(version, "txn-1", 4000, 7, committed=True)


def _response(api_key: ApiKey, version: int) -> Any:
    cls = protocol.response_class(api_key, version)
    mod = sys.modules[cls.__module__]
    throttle = datetime.timedelta(milliseconds=25)
    if api_key == ApiKey.FIND_COORDINATOR:
        if version >= 4:
            coordinator = mod.Coordinator(
                key="txn-1",
                node_id=2,
                host="broker-2",
                port=9093,
                error_code=ErrorCode(0),
                error_message=None,
            )
            return cls(throttle_time=throttle, coordinators=(coordinator,))
        kw: dict[str, Any] = {"error_code": ErrorCode(0), "node_id": 2, "host": "broker-2", "port": 9093}
        if version >= 1:
            kw |= {"throttle_time": throttle, "error_message": None}
        return cls(**kw)
    if api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
        results = tuple(
            mod.AddPartitionsToTxnTopicResult(
                name=topic,
                results_by_partition=tuple(
                    mod.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=ErrorCode(code)
                    )
                    for p, code in parts
                ),
            )
            for topic, parts in (("orders", ((0, 0), (4, 53))), ("audit", ((1, 29),)))
        )
        return cls(throttle_time=throttle, results_by_topic_v3_and_below=results)
    return cls(throttle_time=throttle, error_code=ErrorCode(48))  # INVALID_TXN_STATE


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_request_frame_reads_back_with_kio(case: tuple[ApiKey, int]) -> None:
    api_key, version = case
    body = _request(api_key, version)
    assert body.__api_key__ == api_key and body.__version__ == version
    frame = b"".join(
        bytes(b) for b in protocol.encode_request(api_key, version, CORRELATION_ID, CLIENT_ID, body)
    )

    (size,) = struct.unpack_from(">i", frame, 0)
    assert size == len(frame) - 4
    flexible = version >= FIRST_FLEXIBLE[api_key]
    assert protocol.is_flexible(api_key, version) is flexible is type(body).__flexible__
    header_cls = type(body).__header_schema__
    assert header_cls.__module__.startswith(f"kio.schema.request_header.v{2 if flexible else 1}.")
    header, header_size = entity_reader(header_cls)(frame, 4)  # returns the bytes it read
    pos = 4 + header_size
    assert (header.request_api_key, header.request_api_version) == (api_key, version)
    assert header.correlation_id == CORRELATION_ID and header.client_id == CLIENT_ID
    # client_id stays an int16-length string, also in header v2; v2 then adds empty tagged fields.
    client_end = 4 + 8 + 2 + len(CLIENT_ID)
    assert frame[12:client_end] == struct.pack(">h", len(CLIENT_ID)) + CLIENT_ID.encode()
    if flexible:
        assert frame[client_end] == 0 and pos == client_end + 1
    else:
        assert pos == client_end

    decoded, body_size = entity_reader(type(body))(frame, pos)
    assert pos + body_size == len(frame)
    assert decoded == body


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_response_decodes_through_the_project_header_code(case: tuple[ApiKey, int]) -> None:
    api_key, version = case
    resp = _response(api_key, version)
    header_version = protocol.response_header_version(api_key, version)
    assert header_version == (1 if version >= FIRST_FLEXIBLE[api_key] else 0)
    out = io.BytesIO()
    header_cls = type(resp).__header_schema__
    entity_writer(header_cls)(out, header_cls(correlation_id=CORRELATION_ID))
    header_len = out.tell()
    entity_writer(type(resp))(out, resp)
    buf = memoryview(out.getvalue())

    cid, offset = protocol.decode_response_header(header_version, buf)
    assert (cid, offset) == (CORRELATION_ID, header_len)
    assert header_len == (5 if header_version == 1 else 4)
    assert protocol.decode_response(api_key, version, buf, offset) == resp


def test_flexible_response_header_with_a_tagged_field_is_skipped() -> None:
    resp = _response(ApiKey.END_TXN, 4)
    out = io.BytesIO()
    entity_writer(type(resp))(out, resp)
    # One tagged field (tag 3, 2 bytes) in the response header, which this client does not know.
    buf = memoryview(struct.pack(">i", 9) + b"\x01\x03\x02zz" + out.getvalue())
    cid, offset = protocol.decode_response_header(1, buf)
    assert (cid, offset) == (9, 9)
    assert int(protocol.decode_response(ApiKey.END_TXN, 4, buf, offset).error_code) == 48


@pytest.mark.parametrize("version", range(0, 5))
def test_find_coordinator_result_reads_every_version(version: int) -> None:
    got = protocol.find_coordinator_result(_response(ApiKey.FIND_COORDINATOR, version), "txn-1")
    assert got == protocol.Coordinator(0, None, 2, "broker-2", 9093)


def test_find_coordinator_v4_answer_without_the_key_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="'other'"):
        protocol.find_coordinator_result(_response(ApiKey.FIND_COORDINATOR, 4), "other")


def test_find_coordinator_v0_cannot_ask_for_a_transaction_coordinator() -> None:
    with pytest.raises(ValueError, match="v0 finds group coordinators only"):
        protocol.build_find_coordinator_request(0, "txn-1", protocol.COORDINATOR_KEY_TRANSACTION)


def test_add_partitions_to_txn_groups_by_topic_and_reads_errors() -> None:
    req = protocol.build_add_partitions_to_txn_request(3, "txn-1", 4000, 7, TXN_PARTITIONS)
    assert [(t.name, t.partitions) for t in req.v3_and_below_topics] == [("orders", (0, 4)), ("audit", (1,))]
    errors = protocol.add_partitions_to_txn_errors(_response(ApiKey.ADD_PARTITIONS_TO_TXN, 3))
    assert errors == {TXN_PARTITIONS[0]: 0, TXN_PARTITIONS[1]: 53, TXN_PARTITIONS[2]: 29}


def test_truncated_txn_response_is_a_protocol_error() -> None:
    resp = _response(ApiKey.ADD_PARTITIONS_TO_TXN, 2)
    out = io.BytesIO()
    entity_writer(type(resp))(out, resp)
    buf = memoryview(struct.pack(">i", 1) + out.getvalue()[:-3])
    with pytest.raises(ProtocolError, match="ADD_PARTITIONS_TO_TXN v2"):
        protocol.decode_response(ApiKey.ADD_PARTITIONS_TO_TXN, 2, buf, 4)
