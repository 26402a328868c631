"""Tests that start librdkafka's mock cluster."""
