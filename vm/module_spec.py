"""What the compiler hands the module writer (docs/internals.md section 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy

from kiln.vm._generated import constants

if TYPE_CHECKING:
    from kiln.vm.isa import Instr, Label

DTYPES = constants.DTYPES
"""Short dtype names in the order of the schema's DType enum (schemas/runtime_constants.toml)."""

DTYPE_SIZES = constants.DTYPE_SIZES

_NUMPY_NAMES = {"float32": "f32", "float64": "f64", "int8": "i8", "int16": "i16",
                "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
                "uint32": "u32", "uint64": "u64", "bool": "bool",
                "complex64": "c64", "complex128": "c128",
                "float16": "f16", "bfloat16": "bf16"}


def dtype_of(array: numpy.ndarray) -> str:
    """The kiln short dtype name of a numpy array's dtype."""
    name = _NUMPY_NAMES.get(array.dtype.name)
    if name is None:
        raise TypeError(f"dtype {array.dtype} has no kiln equivalent "
                        f"(supported: {', '.join(DTYPES)})")
    return name


@dataclass(frozen=True)
class TensorType:
    """A dense array type: dtype short name and shape."""

    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self):
        if self.dtype not in DTYPE_SIZES:
            raise ValueError(f"unknown dtype {self.dtype!r} (expected one of {DTYPES})")
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if any(d < 0 for d in self.shape):
            raise ValueError(f"negative dimension in shape {self.shape}")

    @property
    def byte_size(self) -> int:
        n = DTYPE_SIZES[self.dtype]
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        return "x".join([str(d) for d in self.shape] + [self.dtype])

    @classmethod
    def of(cls, array: numpy.ndarray) -> TensorType:
        return cls(dtype_of(array), array.shape)


@dataclass
class ValueInfo:
    name: str
    type: TensorType


@dataclass
class FunctionSpec:
    """A procedure; arguments arrive in r0..r(len(args)-1)."""

    name: str
    exported: bool
    args: list[ValueInfo]
    results: list[ValueInfo]
    arg_tree: str
    result_tree: str
    ref_registers: int
    i64_registers: int
    code: list[Instr | Label]
    # bytes of the arena alloc.transient places buffers in (planned at export; 0: none)
    transient_size: int = 0


@dataclass
class GlobalSpec:
    name: str
    type: TensorType
    mutable: bool
    initial: numpy.ndarray | None = None


@dataclass
class ConstantSpec:
    data: numpy.ndarray


@dataclass
class KernelImageSpec:
    target_triple: str
    cpu_features: str
    code: bytes
    text_size: int
    segment_align: int
    relocs: list[tuple[int, int]] = field(default_factory=list)
    # Text offsets of the functions the image exports (strictly increasing).
    # None: the writer uses the entry offsets of the kernels in this image.
    entry_points: list[int] | None = None
    # The CPU variant it was built for ("x86-64-v3", "host"; format 2.4); "" names none.
    variant: str = ""


@dataclass
class KernelVariantSpec:
    """Another build of kernel image `base`'s kernels for other CPUs (format 2.4): `image` holds its
    code, target and variant name, `entry_offsets` the entry of each kernel of image `base`, in
    ModuleSpec.kernels order. The runtime loads the first variant of an image the host supports
    (ModuleSpec.kernel_variants is best first), else the base image."""
    base: int
    image: KernelImageSpec
    entry_offsets: list[int]


@dataclass
class BindingSpec:
    byte_size: int
    writable: bool


MAX_WORKGROUPS = constants.MAX_WORKGROUPS
"""The most workgroups one dispatch may ask for (KILN_MAX_WORKGROUPS in the runtime)."""

MAX_REGISTERS = constants.MAX_REGISTERS
"""The most ref registers, and the most i64 registers, of one function (KILN_MAX_REGISTERS)."""


@dataclass
class KernelSpec:
    name: str
    image: int
    entry_offset: int
    bindings: list[BindingSpec]
    push_constant_count: int
    # The most workgroups a dispatch of this kernel may ask for, at most
    # MAX_WORKGROUPS. None: the writer uses the largest count that the
    # module's dispatches of this kernel use (1 when there is none).
    max_workgroups: int | None = None
    # Floating-point operations of one dispatch (kiln.compiler.flops; format
    # 2.5): what achieved GFLOP/s are computed from. 0: not declared.
    flops: int = 0


@dataclass
class ModuleSpec:
    name: str
    functions: list[FunctionSpec] = field(default_factory=list)
    globals: list[GlobalSpec] = field(default_factory=list)
    constants: list[ConstantSpec] = field(default_factory=list)
    kernel_images: list[KernelImageSpec] = field(default_factory=list)
    kernels: list[KernelSpec] = field(default_factory=list)
    # The kernels need each binding aligned only to its elements (kiln's compiler
    # from format 2.1 on); False: 64-byte aligned bindings (kernel_abi.h), so the
    # runtime passes them an aligned copy of a less aligned argument.
    element_aligned_bindings: bool = False
    # Where the module came from (format 2.3): key -> text, in order (kiln.compiler.provenance).
    provenance: dict[str, str] = field(default_factory=dict)
    # Other builds of the kernel images for other CPUs, best first (format 2.4).
    kernel_variants: list[KernelVariantSpec] = field(default_factory=list)
