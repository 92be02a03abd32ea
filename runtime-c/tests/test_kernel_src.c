/* The test kernel: compiled freestanding at build time and flattened to the
 * raw bytes of its .text section (no relocations, no data, no calls), the way
 * a kiln kernel image's text looks. One entry point at offset 0; push
 * constant 0 selects what it does:
 *   0: out[i] = in[i] + pc[1] for this workgroup's slice of n = pc[2] i32s
 *      (bindings: in, out)
 *   1: out[id] += id + 1   (binding: out; detects lost or repeated workgroups)
 *   2: return code pc[2] from workgroup pc[1], 0 from the others */
#include "kiln/kernel_abi.h"

int32_t kiln_test_kernel(const kiln_dispatch_args_t* args, uint32_t id) {
  const int64_t* pc = args->push_constants;
  int64_t mode = pc[0];
  if (mode == 0) {
    const int32_t* in = (const int32_t*)args->bindings[0];
    int32_t* out = (int32_t*)args->bindings[1];
    int64_t n = pc[2];
    int64_t count = args->workgroup_count;
    int64_t begin = n * (int64_t)id / count;
    int64_t end = n * ((int64_t)id + 1) / count;
    for (int64_t i = begin; i < end; ++i) out[i] = in[i] + (int32_t)pc[1];
    return 0;
  }
  if (mode == 1) {
    int32_t* out = (int32_t*)args->bindings[0];
    out[id] += (int32_t)id + 1;
    return 0;
  }
  if (mode == 2) {
    return (int64_t)id == pc[1] ? (int32_t)pc[2] : 0;
  }
  return -1;
}
