"""LLVM IR generation for dispatch regions (loop nests over kernel bindings)."""
