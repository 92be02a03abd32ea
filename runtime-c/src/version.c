/* The runtime's version: pyproject.toml's, passed by CMake (cmake/KilnVersion.cmake). */
#include "kiln/runtime.h"

#ifndef KILN_RUNTIME_VERSION_STRING
#error "KILN_RUNTIME_VERSION_STRING is defined by runtime-c/CMakeLists.txt"
#endif

const char* kiln_runtime_version(void) { return KILN_RUNTIME_VERSION_STRING; }
