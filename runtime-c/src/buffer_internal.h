/* Buffer views inside the runtime: owned allocations and borrowed memory. */
#ifndef KILN_BUFFER_INTERNAL_H_
#define KILN_BUFFER_INTERNAL_H_

#include "kiln/runtime.h"

/* Alignment of every view's data: owned allocations, module bytes used in
 * place, and the row views of buffer.row (kernel_abi.h relies on it). */
#define KILN_BUFFER_ALIGN KILN_BUFFER_ALIGNMENT

/* Allocates an uninitialized (not zeroed) 64-byte aligned view. */
kiln_status_t kiln_buffer_view_allocate(kiln_dtype_t dtype, size_t rank,
                                        const int64_t* shape,
                                        kiln_buffer_view_t** out);

/* kiln_buffer_view_wrap (runtime.h) also wraps memory inside the runtime: a
 * module's read-only constant used in place, or a row of another view. */

/* The VM's write barrier. A buffer the running invocation made is writable in
 * place (by kernels, buffer.set_row) until the VM freezes it: when it is
 * stored into a global, or when buffer.row takes a row of it (so that a row
 * view never changes under its reader, whether it shares the memory or is a
 * copy). Freezing is permanent. The VM calls these only for buffers that the
 * running invocation made, so only its thread touches the flag. */
void kiln_buffer_view_freeze(kiln_buffer_view_t* view);
int kiln_buffer_view_is_frozen(const kiln_buffer_view_t* view);
/* global.take: a global's buffer that nothing but its context holds
 * (kiln_buffer_view_is_exclusive, runtime.h) becomes writable again, for a
 * kernel to update the global in place. */
void kiln_buffer_view_thaw(kiln_buffer_view_t* view);

/* The VM's initialization rule: a buffer made by `alloc` is marked unwritten
 * (its bytes are stale heap memory, or a fresh mapping's zeros). A dispatch that binds it to a writable
 * binding of exactly its size writes every byte (kernel_abi.h) and marks it
 * written; any other use first zeroes it. So no call can read, return or
 * store bytes that nothing in it wrote. Only the allocating invocation's
 * thread touches the flag. */
void kiln_buffer_view_mark_unwritten(kiln_buffer_view_t* view);
void kiln_buffer_view_mark_written(kiln_buffer_view_t* view);

/* A wrapped view whose memory the VM may write in place, as an owned one's
 * (kiln_buffer_view_mutable_data no longer NULL): a call's transient arena. */
void kiln_buffer_view_mark_writable_memory(kiln_buffer_view_t* view);
void kiln_buffer_view_zero_if_unwritten(kiln_buffer_view_t* view);

/* Product of dims times dtype size, with overflow checks; 0 on success. */
int kiln_compute_byte_size(kiln_dtype_t dtype, size_t rank,
                           const int64_t* shape, size_t* out);

/* True when the view has exactly this dtype and shape. */
int kiln_buffer_view_has_type(const kiln_buffer_view_t* view, kiln_dtype_t dtype,
                              size_t rank, const int64_t* shape);

/* Formats "2x3xf32" into buf (always NUL-terminated). */
void kiln_format_type(kiln_dtype_t dtype, size_t rank, const int64_t* shape,
                      char* buf, size_t buf_size);

#endif
