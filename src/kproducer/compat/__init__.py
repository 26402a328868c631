"""Drop-in adapters for programs written for other Python Kafka clients (see docs/migrating.md)."""
