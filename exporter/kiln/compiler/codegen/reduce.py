"""Reduction kernels (placeholder replaced below)."""
