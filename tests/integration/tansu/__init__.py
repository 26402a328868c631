"""Tests that start the Tansu broker (the embedded broker)."""
