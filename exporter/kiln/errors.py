"""jax.errors: the errors kiln raises, under JAX's names where they mean the same thing, so that
``except jax.errors.ConcretizationTypeError`` keeps working after the import swap.

Each name is kiln's class (or a base class of it), not a copy: ``ConcretizationTypeError`` is
kiln.ConcretizationError (a TypeError), raised for any traced value used where Python needs a concrete one;
``TracerBoolConversionError`` (``if x:``) and ``TracerIntegerConversionError`` (``int(x)``, ``range(x)``) are
its subclasses; ``TracerArrayConversionError`` is kiln.NumpyOnTracerError (numpy.asarray or a numpy function
on a traced array); ``NonConcreteBooleanIndexError`` is raised for ``x[mask]`` with a traced boolean mask;
``JaxRuntimeError`` is the C runtime's KilnRuntimeError. ``JAXTypeError`` and ``JAXIndexError`` are TypeError
and IndexError, the bases of kiln's type and index errors.
"""
from kiln.core.errors import ConcretizationError as ConcretizationTypeError
from kiln.core.errors import NumpyOnTracerError as TracerArrayConversionError
from kiln.core.errors import TracerBoolConversionError, TracerIntegerConversionError, UnexpectedTracerError
from kiln.numpy.indexing import NonConcreteBooleanIndexError
from kiln.vm._clib import KilnRuntimeError as JaxRuntimeError

JAXTypeError = TypeError
JAXIndexError = IndexError

__all__ = ["ConcretizationTypeError", "TracerArrayConversionError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "UnexpectedTracerError", "NonConcreteBooleanIndexError", "JaxRuntimeError",
           "JAXTypeError", "JAXIndexError"]
