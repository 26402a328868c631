"""Tests that start Spark (local[N], local-cluster or Spark Connect)."""
