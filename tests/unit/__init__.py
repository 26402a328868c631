"""Unit tests: no broker, no Spark; one directory per source module or package of kproducer."""
