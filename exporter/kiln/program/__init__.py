"""The Program API: globals, kernels and public functions exported as one module."""
from .program import CompiledArtifact, Program

__all__ = ["Program", "CompiledArtifact"]
