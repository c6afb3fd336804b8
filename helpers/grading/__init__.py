"""The exercises' checks."""
