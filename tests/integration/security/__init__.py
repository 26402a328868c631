"""Tests that start TLS (stunnel) or SASL fronts in front of a broker."""
