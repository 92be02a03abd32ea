/* The line between the kiln compiler and the kiln runtime.
 *
 * A kernel is a C-ABI function compiled by the exporter into a kernel image.
 * It reads and writes only the buffers bound to it, imports nothing (no libc,
 * no libm), and processes one workgroup per call. The runtime splits a
 * dispatch's workgroups over its worker threads; kernels never spawn threads.
 */
#ifndef KILN_KERNEL_ABI_H_
#define KILN_KERNEL_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Arguments shared by every workgroup of one dispatch. */
typedef struct kiln_dispatch_args {
  /* Base pointers of the bound buffers, in the kernel's binding order.
   * Every pointer is 64-byte aligned and its buffer is at least as large as
   * the byte size the module declares for that binding.
   *
   * The 64-byte alignment is a hard guarantee, not just element alignment:
   * the compiler declares every binding parameter `align 64` to LLVM
   * (kiln.compiler.codegen.kernel), so generated code may use aligned vector
   * accesses and fold address arithmetic on that assumption. The runtime keeps
   * it for every buffer a dispatch can see: owned buffers are allocated
   * 64-byte aligned, module bytes used in place are laid out 64-byte aligned,
   * and the VM's `buffer.row` shares src's memory only when the row starts on
   * a 64-byte boundary ((row bytes * index) % 64 == 0) and otherwise copies
   * the row into a fresh 64-byte aligned buffer. Reading on to the next 64-byte
   * boundary past a buffer's end stays in readable memory, but only owned
   * buffers have zeros there (past a row view come the next row's elements,
   * past a constant other module bytes): kernels must not use those values. */
  void* const* bindings;
  /* Scalar operands (loop indices, dynamic offsets), push_constant_count of them. */
  const int64_t* push_constants;
  /* Total number of workgroups of this dispatch (>= 1). */
  uint32_t workgroup_count;
  uint32_t reserved;
} kiln_dispatch_args_t;

/* Runs workgroup `workgroup_id` (0 <= id < workgroup_count). Returns 0 on
 * success; any other value fails the dispatch with that code.
 *
 * A successful dispatch, all its workgroups together, writes every byte of
 * every binding the module declares `writable` (whose buffer the runtime
 * makes exactly the declared size). The runtime relies on it: a buffer first
 * written by such a binding is not zeroed beforehand (docs/vm.md). */
typedef int32_t (*kiln_kernel_fn_t)(const kiln_dispatch_args_t* args,
                                    uint32_t workgroup_id);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KERNEL_ABI_H_ */
