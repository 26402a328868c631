"""Write through the kproducer sink with secrets among the options, with Spark's event log on.

Run in its own process (one SparkContext per process) by tests/integration/spark/test_spark_secrets.py, which then
searches the event log (plans, properties, task metrics) and this process's output for the secrets.

    python -m tests.support.spark_plan_job BOOTSTRAP EVENT_LOG_DIR SECRET_PREFIX
"""

from __future__ import annotations

import os
import sys


def main(bootstrap: str, event_dir: str, secret: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kproducer.spark import register

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("kproducer-secrets-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", "file://" + event_dir)
        .config("spark.eventLog.compress", "false")
        .getOrCreate()
    )
    register(spark)
    opts = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": "spark-secrets",
        # PLAINTEXT: these settings are accepted (and ignored, with a warning naming only the keys).
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="u" password="{secret}jaas";',
        "kafka.sasl.password": f"{secret}sasl",
        "kafka.ssl.key.password": f"{secret}keypw",
        "kafka.ssl.keystore.key": f"{secret}inlinekey",
    }
    df = spark.range(0, 10, 1, 1).selectExpr("cast(id as string) as value")
    df.write.format("kproducer").options(**opts).mode("append").save()
    print("WRITE-DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
