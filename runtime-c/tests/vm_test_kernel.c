/* The VM tests' kernel, compiled freestanding and flattened to its .text
 * bytes (one entry point at offset 0, no relocations). Bindings: a, b, out
 * (f32); push constants: n, scale. For its workgroup's slice of [0, n):
 *   out[i] = a[i] + scale * b[i] */
#include "kiln/kernel_abi.h"

int32_t kiln_vm_test_kernel(const kiln_dispatch_args_t* args, uint32_t id) {
  const float* a = (const float*)args->bindings[0];
  const float* b = (const float*)args->bindings[1];
  float* out = (float*)args->bindings[2];
  int64_t n = args->push_constants[0];
  float scale = (float)args->push_constants[1];
  int64_t count = args->workgroup_count;
  int64_t begin = n * (int64_t)id / count;
  int64_t end = n * ((int64_t)id + 1) / count;
  if (n < 0) return 7;
  for (int64_t i = begin; i < end; ++i) out[i] = a[i] + scale * b[i];
  return 0;
}
