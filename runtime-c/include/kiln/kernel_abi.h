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
   * Every buffer is at least as large as the byte size the module declares
   * for that binding, and every pointer is aligned to its buffer's elements
   * (kiln_dtype_alignment: the element size, at most 8).
   *
   * That is all the alignment the kernels of a module marked
   * element_aligned_bindings may assume (kiln's compiler from module format
   * 2.1 on: kiln.compiler.codegen.kernel declares no `align` on the binding
   * parameters, so vector loads and stores are unaligned ones, which cost
   * nothing extra on x86-64 and AArch64); such bindings may be the caller's
   * memory (kiln_buffer_view_wrap) or rows at any index (`buffer.row`).
   *
   * Kernels of a module without that mark (format before 2.1, compiled with
   * `align 64` binding parameters) may assume 64-byte aligned pointers, and
   * the runtime keeps that for every such module: owned
   * buffers are allocated 64-byte aligned, module bytes used in place are
   * laid out 64-byte aligned, kiln_context_invoke copies an argument that is
   * not, and `buffer.row` shares src's memory only when the row starts on a
   * 64-byte boundary, copying it into a fresh aligned buffer otherwise.
   *
   * Reading on to the next 64-byte boundary (of the address) past a buffer's
   * end stays in readable memory, but only owned buffers have zeros there:
   * kernels must not use those values. */
  void* const* bindings;
  /* Scalar operands (loop indices, dynamic offsets), push_constant_count of them. */
  const int64_t* push_constants;
  /* Total number of workgroups of this dispatch (>= 1). */
  uint32_t workgroup_count;
  /* The size of the CPU's last-level cache in KiB, 0 where unknown (earlier
   * runtimes of format 2.7 and before passed 0 here, in a field then named
   * `reserved`). A kernel may choose how it moves data by it (kiln's row-fused
   * kernels write outputs as large as this cache with non-temporal stores),
   * never what it computes: results must not depend on it. */
  uint32_t last_level_cache_kib;
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
