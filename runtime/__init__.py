"""TIR -> LLVM lowering, JIT, on-disk cache and executors (llvmlite stays in here)."""
