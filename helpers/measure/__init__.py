"""Measurement: the one timing loop, bandwidth, the machine, an environment's footprint, load tests."""
