# Cross-build the runtime for aarch64 Linux and run its tests under qemu-user:
#   apt-get install gcc-aarch64-linux-gnu qemu-user
#   cmake -S runtime-c -B build-aarch64 \
#         -DCMAKE_TOOLCHAIN_FILE=runtime-c/cmake/aarch64-linux-gnu.cmake -DKILN_BUILD_TESTS=ON
#   cmake --build build-aarch64 && ctest --test-dir build-aarch64
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_OBJCOPY aarch64-linux-gnu-objcopy)
set(CMAKE_NM aarch64-linux-gnu-nm)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu)
