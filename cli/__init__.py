"""The `kiln` command."""
