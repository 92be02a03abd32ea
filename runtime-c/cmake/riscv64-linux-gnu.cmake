# Cross-build the runtime for riscv64 Linux (rv64gc) and run its tests under qemu-user:
#   bash tests/install_cross_tools.sh riscv64     (gcc-riscv64-linux-gnu, qemu-user)
#   cmake -S runtime-c -B build-riscv64 \
#         -DCMAKE_TOOLCHAIN_FILE=runtime-c/cmake/riscv64-linux-gnu.cmake -DKILN_BUILD_TESTS=ON
#   cmake --build build-riscv64 && ctest --test-dir build-riscv64
# qemu runs a CPU with the vector extension (RVV 1.0, 128-bit vectors), so modules compiled for rv64gcv run.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(CMAKE_C_COMPILER riscv64-linux-gnu-gcc)
set(CMAKE_OBJCOPY riscv64-linux-gnu-objcopy)
set(CMAKE_NM riscv64-linux-gnu-nm)
set(CMAKE_FIND_ROOT_PATH /usr/riscv64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-riscv64;-L;/usr/riscv64-linux-gnu;-cpu;rv64,v=true,vlen=128)
