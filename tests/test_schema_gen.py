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
    header = (schema_gen.ROOT / "runtime-c" / "include" / "kiln" / "runtime.h").read_text()
    for name, value in s.enums["DType"].values:
        assert f"KILN_DTYPE_{name} = {value}," in header


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
