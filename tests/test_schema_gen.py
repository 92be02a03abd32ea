"""The generated files are up to date, and the generator reads the schema subset."""

import pytest

from kiln.vm import schema_gen


def test_regenerating_changes_nothing():
    for path, text in schema_gen.generate().items():
        assert path.read_text() == text, f"{path} is stale: run python -m kiln.vm.schema_gen"


def test_check_mode_reports_up_to_date():
    assert schema_gen.main(["--check"]) == 0


def test_generation_is_deterministic():
    assert schema_gen.generate() == schema_gen.generate()


def test_struct_layout_and_alignment():
    s = schema_gen.parse_schema(schema_gen.SCHEMA.read_text())
    reloc = s.structs["Reloc"]
    assert (reloc.size, reloc.align, reloc.offsets) == (16, 8, [0, 8])
    assert schema_gen.max_align(s) == 64
    module = s.tables["Module"]
    assert [f.name for f in module.fields[:2]] == ["version_major", "version_minor"]
    assert s.file_identifier == "KILN"


def test_dtype_enum_matches_runtime_header():
    s = schema_gen.parse_schema(schema_gen.SCHEMA.read_text())
    include = schema_gen.ROOT / "runtime-c" / "include" / "kiln"
    assert '#include "kiln/constants.h"' in (include / "runtime.h").read_text()
    header = (include / "constants.h").read_text()
    for name, value in s.enums["DType"].values:
        assert f"KILN_DTYPE_{name} = {value}," in header


def test_shared_constants():
    from kiln.vm import writer
    from kiln.vm._generated import constants
    from kiln.vm.module_spec import DTYPE_SIZES, DTYPES, MAX_REGISTERS, MAX_WORKGROUPS
    from kiln.vm.runtime import CODE_NAMES, DEADLINE_EXCEEDED, KILN_DTYPES

    assert (DTYPES, KILN_DTYPES) == (constants.DTYPES, constants.DTYPES)
    assert DTYPES[-5:] == ("u16", "u32", "u64", "c64", "c128")  # appended: codes are never renumbered
    assert (DTYPE_SIZES["bf16"], DTYPE_SIZES["u16"], DTYPE_SIZES["u32"], DTYPE_SIZES["u64"]) == (2, 2, 4, 8) and (MAX_WORKGROUPS, MAX_REGISTERS) == (1 << 24, 1 << 20)
    assert (DEADLINE_EXCEEDED, CODE_NAMES[10], writer.FORMAT_VERSION) == (10, "DEADLINE_EXCEEDED", (2, 9))
    header = (schema_gen.ROOT / "runtime-c" / "include" / "kiln" / "constants.h").read_text()
    for line in ("KILN_DEADLINE_EXCEEDED = 10,", "#define KILN_MAX_RANK 16", "#define KILN_MAX_WORKERS 1024",
                 "#define KILN_MAX_WORKGROUPS (1u << 24)", "#define KILN_MAX_REGISTERS (1u << 20)",
                 "#define KILN_MODULE_VERSION_MAJOR 2", "#define KILN_DTYPE_COUNT 15",
                 "KILN_DTYPE_U16 = 10,", "KILN_DTYPE_U32 = 11,", "KILN_DTYPE_U64 = 12,", "KILN_DTYPE_C64 = 13,", "KILN_DTYPE_C128 = 14,"):
        assert line in header


_CONSTANTS = schema_gen.CONSTANTS.read_text()


@pytest.mark.parametrize("change, message", [
    (lambda t: t.replace('name = "BF16"', 'name = "B16"'), "differ from the DType enum"),
    (lambda t: t.replace("code = 10\n", "code = 11\n"), "out of order"),
    (lambda t: t.replace("value = 16\n", "value = 16\nshift = 4\n"), "exactly one of value and shift"),
    (lambda t: t.replace("shift = 24", "shift = 40"), "does not fit a uint32"),
    (lambda t: t.replace('short = "f64"', 'short = "f32"'), "unique"),
    (lambda t: t.replace("size = 8", "size = 3", 1), "is not 1, 2, 4, 8 or 16"),
    (lambda t: t + "\n[[status]]\nname = \"OK\"\ncode = 11\n", "duplicate name"),
    (lambda t: t + "\n[extra]\nx = 1\n", "unknown tables"),
])
def test_bad_constants_are_rejected(change, message):
    s = schema_gen.parse_schema(schema_gen.SCHEMA.read_text())
    text = change(_CONSTANTS)
    assert text != _CONSTANTS
    with pytest.raises(schema_gen.SchemaError, match=message):
        schema_gen.load_constants(text, s)


@pytest.mark.parametrize("text, message", [
    ("table T { x: int = 3; } root_type T; file_identifier \"ABCD\";", "defaults"),
    ("union U { A } root_type T;", "unsupported declaration"),
    ("table T { x: Missing; } root_type T; file_identifier \"ABCD\";", "unknown type"),
    ("table T { x: int; } root_type T; file_identifier \"AB\";", "4 characters"),
])
def test_unsupported_schema_is_rejected(text, message):
    with pytest.raises(schema_gen.SchemaError, match=message):
        schema_gen.parse_schema(text)


def test_bad_op_table_is_rejected():
    with pytest.raises(schema_gen.SchemaError, match="bad operand"):
        schema_gen.load_ops('[[op]]\ncode = 1\nname = "x"\noperands = ["q:a"]\ndoc = ""\n')
    with pytest.raises(schema_gen.SchemaError, match="duplicate"):
        schema_gen.load_ops('[[op]]\ncode = 1\nname = "x"\noperands = []\ndoc = ""\n'
                            '[[op]]\ncode = 1\nname = "y"\noperands = []\ndoc = ""\n')
