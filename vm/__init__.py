"""kiln.vm: the module format, the bytecode ISA and the binding to the C runtime."""
