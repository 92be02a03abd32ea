"""Matmul kernels (placeholder replaced below)."""
