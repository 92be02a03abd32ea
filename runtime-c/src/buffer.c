/* Buffer views: dtype + shape + row-major data, refcounted; owned data is 64-byte aligned.
 *
 * An owned view is one allocation: the header padded to 64 bytes, then the
 * data rounded up to a multiple of 64 bytes (the padding is zeroed so that
 * vector loads past the last element read defined bytes); from
 * KILN_MAPPED_BUFFER_MIN bytes up a mapping of its own in transparent huge
 * pages (memory.h), else aligned_alloc. A wrapped view
 * points at memory it does not own and keeps its owner alive. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_internal.h"
#include "generated/constant_tables.h"
#include "memory.h"
#include "status_internal.h"

struct kiln_buffer_view {
  atomic_size_t refcount;
  kiln_dtype_t dtype;
  size_t rank;
  int64_t shape[KILN_MAX_RANK];
  size_t element_count;
  size_t byte_size;
  void* data;
  int owned;
  /* An owned view's allocation is a mapping of its own (memory.h). */
  int mapped;
  /* A wrapped view of memory the VM may write in place (a call's transient
   * arena; kiln_buffer_view_mark_writable_memory). */
  int writable_memory;
  /* Set by the VM (kiln_buffer_view_freeze, see buffer_internal.h): nothing
   * writes into the buffer in place from then on. */
  int frozen;
  /* Set by the VM's alloc (kiln_buffer_view_mark_unwritten): the contents
   * are stale heap bytes, to be zeroed before anything reads them. */
  int unwritten;
  void (*keepalive_release)(void*);
  void* keepalive;
};

/* ---- dtypes ------------------------------------------------------------ */

static const struct {
  const char* name;
  size_t size;
} kiln_dtype_table[KILN_DTYPE_COUNT] = KILN_DTYPE_TABLE_INIT; /* schemas/runtime_constants.toml */

static int kiln_dtype_valid(kiln_dtype_t dtype) {
  return (int)dtype >= 0 && (int)dtype < KILN_DTYPE_COUNT;
}

size_t kiln_dtype_size(kiln_dtype_t dtype) {
  return kiln_dtype_valid(dtype) ? kiln_dtype_table[dtype].size : 0;
}

size_t kiln_dtype_alignment(kiln_dtype_t dtype) {
  size_t size = kiln_dtype_size(dtype);
  return size < 8 ? size : 8;
}

const char* kiln_dtype_name(kiln_dtype_t dtype) {
  return kiln_dtype_valid(dtype) ? kiln_dtype_table[dtype].name : "<invalid dtype>";
}

int kiln_dtype_from_name(const char* name, kiln_dtype_t* out) {
  if (!name || !out) return 1;
  for (int i = 0; i < KILN_DTYPE_COUNT; ++i) {
    if (strcmp(name, kiln_dtype_table[i].name) == 0) {
      *out = (kiln_dtype_t)i;
      return 0;
    }
  }
  return 1;
}

/* ---- sizes and types --------------------------------------------------- */

int kiln_compute_byte_size(kiln_dtype_t dtype, size_t rank,
                           const int64_t* shape, size_t* out) {
  if (!kiln_dtype_valid(dtype) || rank > KILN_MAX_RANK) return 1;
  if (rank > 0 && !shape) return 1;
  size_t total = kiln_dtype_table[dtype].size;
  int has_zero = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 0) return 1;
    if (shape[i] == 0) has_zero = 1;
  }
  for (size_t i = 0; i < rank; ++i) {
    uint64_t dim = (uint64_t)shape[i];
    if (has_zero) continue; /* the size is 0; dims must still be >= 0 */
    if (dim > SIZE_MAX || (dim != 0 && total > SIZE_MAX / (size_t)dim)) return 1;
    total *= (size_t)dim;
  }
  if (has_zero) total = 0;
  /* Leave room for the 64-byte rounding of the allocation. */
  if (total > SIZE_MAX - 2 * KILN_BUFFER_ALIGN) return 1;
  *out = total;
  return 0;
}

void kiln_format_type(kiln_dtype_t dtype, size_t rank, const int64_t* shape,
                      char* buf, size_t buf_size) {
  if (!buf || buf_size == 0) return;
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < rank && shape; ++i) {
    int n = snprintf(buf + used, buf_size - used, "%lldx", (long long)shape[i]);
    if (n < 0 || (size_t)n >= buf_size - used) return; /* truncated, terminated */
    used += (size_t)n;
  }
  snprintf(buf + used, buf_size - used, "%s", kiln_dtype_name(dtype));
}

static kiln_status_t kiln_check_type(kiln_dtype_t dtype, size_t rank,
                                     const int64_t* shape, size_t* byte_size) {
  if (!kiln_dtype_valid(dtype)) {
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "invalid dtype %d: expected 0..%d", (int)dtype,
                            KILN_DTYPE_COUNT - 1);
  }
  if (rank > KILN_MAX_RANK) {
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "rank %zu exceeds the maximum rank %d", rank,
                            KILN_MAX_RANK);
  }
  if (rank > 0 && !shape) {
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "shape is NULL for a rank-%zu buffer", rank);
  }
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 0) {
      return kiln_make_status(KILN_INVALID_ARGUMENT,
                              "dimension %zu is negative (%lld)", i,
                              (long long)shape[i]);
    }
  }
  if (kiln_compute_byte_size(dtype, rank, shape, byte_size) != 0) {
    char type[256];
    kiln_format_type(dtype, rank, shape, type, sizeof(type));
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "buffer of type %s is too large: its byte size "
                            "overflows size_t",
                            type);
  }
  return NULL;
}

static size_t kiln_element_count(size_t rank, const int64_t* shape) {
  size_t count = 1;
  for (size_t i = 0; i < rank; ++i) count *= (size_t)shape[i];
  return count;
}

static void kiln_fill_header(kiln_buffer_view_t* view, kiln_dtype_t dtype,
                             size_t rank, const int64_t* shape, size_t byte_size) {
  atomic_init(&view->refcount, 1);
  view->dtype = dtype;
  view->rank = rank;
  memset(view->shape, 0, sizeof(view->shape));
  for (size_t i = 0; i < rank; ++i) view->shape[i] = shape[i];
  view->byte_size = byte_size;
  /* No overflow: the byte size was checked (a 0 dim gives 0 whatever the
   * order, and size_t arithmetic wraps without undefined behaviour). */
  view->element_count = kiln_element_count(rank, shape);
}

#define KILN_HEADER_SIZE \
  ((sizeof(kiln_buffer_view_t) + KILN_BUFFER_ALIGN - 1) & ~(size_t)(KILN_BUFFER_ALIGN - 1))

kiln_status_t kiln_buffer_view_allocate(kiln_dtype_t dtype, size_t rank,
                                        const int64_t* shape,
                                        kiln_buffer_view_t** out) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  size_t byte_size = 0;
  kiln_status_t status = kiln_check_type(dtype, rank, shape, &byte_size);
  if (status) return status;
  /* At least one 64-byte block so that data is never NULL. */
  size_t padded = (byte_size + KILN_BUFFER_ALIGN - 1) & ~(size_t)(KILN_BUFFER_ALIGN - 1);
  if (padded == 0) padded = KILN_BUFFER_ALIGN;
  if (padded > SIZE_MAX - KILN_HEADER_SIZE) {
    return kiln_make_status(KILN_OUT_OF_MEMORY, "buffer of %zu bytes is too large",
                            byte_size);
  }
  /* A large buffer is a mapping of its own, in transparent huge pages (memory.h). */
  int mapped = kiln_memory_is_mapped(KILN_HEADER_SIZE + padded, KILN_MAPPED_BUFFER_MIN);
  kiln_buffer_view_t* view = kiln_memory_alloc(KILN_HEADER_SIZE + padded, mapped);
  if (!view) {
    char type[256];
    kiln_format_type(dtype, rank, shape, type, sizeof(type));
    return kiln_make_status(KILN_OUT_OF_MEMORY,
                            "cannot allocate a buffer of type %s (%zu bytes)",
                            type, byte_size);
  }
  kiln_fill_header(view, dtype, rank, shape, byte_size);
  view->data = (char*)view + KILN_HEADER_SIZE;
  view->owned = 1;
  view->mapped = mapped;
  view->writable_memory = 1;
  view->frozen = 0;
  view->unwritten = 0;
  view->keepalive_release = NULL;
  view->keepalive = NULL;
  /* Zero the tail padding only; the elements are left uninitialized. */
  memset((char*)view->data + byte_size, 0, padded - byte_size);
  *out = view;
  return NULL;
}

kiln_status_t kiln_buffer_view_create(kiln_dtype_t dtype, size_t rank,
                                      const int64_t* shape, const void* data,
                                      size_t data_size,
                                      kiln_buffer_view_t** out) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  size_t byte_size = 0;
  kiln_status_t status = kiln_check_type(dtype, rank, shape, &byte_size);
  if (status) return status;
  if (data && data_size != byte_size) {
    char type[256];
    kiln_format_type(dtype, rank, shape, type, sizeof(type));
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "data size mismatch for a buffer of type %s: "
                            "expected %zu bytes, got %zu",
                            type, byte_size, data_size);
  }
  kiln_buffer_view_t* view = NULL;
  status = kiln_buffer_view_allocate(dtype, rank, shape, &view);
  if (status) return status;
  if (data) {
    if (byte_size) memcpy(view->data, data, byte_size);
  } else if (!view->mapped) { /* a fresh mapping reads as zeros already */
    memset(view->data, 0, byte_size);
  }
  *out = view;
  return NULL;
}

kiln_status_t kiln_buffer_view_wrap(kiln_dtype_t dtype, size_t rank,
                                    const int64_t* shape, void* data,
                                    size_t byte_size,
                                    void (*keepalive_release)(void*),
                                    void* keepalive, kiln_buffer_view_t** out) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  size_t expected = 0;
  kiln_status_t status = kiln_check_type(dtype, rank, shape, &expected);
  if (status) return status;
  if (byte_size != expected) {
    char type[256];
    kiln_format_type(dtype, rank, shape, type, sizeof(type));
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "wrapped memory size mismatch for a buffer of type "
                            "%s: expected %zu bytes, got %zu",
                            type, expected, byte_size);
  }
  if (!data && byte_size != 0) {
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "wrapped memory is NULL for %zu bytes", byte_size);
  }
  if (data && ((uintptr_t)data % kiln_dtype_alignment(dtype)) != 0) {
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "wrapped memory at %p is not aligned to its %s elements "
                            "(a multiple of %zu bytes)",
                            data, kiln_dtype_name(dtype), kiln_dtype_alignment(dtype));
  }
  kiln_buffer_view_t* view = malloc(sizeof(*view));
  if (!view) {
    return kiln_make_status(KILN_OUT_OF_MEMORY,
                            "cannot allocate a buffer view header");
  }
  kiln_fill_header(view, dtype, rank, shape, byte_size);
  view->data = data;
  view->owned = 0;
  view->mapped = 0;
  view->writable_memory = 0;
  view->frozen = 0;
  view->unwritten = 0;
  view->keepalive_release = keepalive_release;
  view->keepalive = keepalive;
  *out = view;
  return NULL;
}

void kiln_buffer_view_retain(kiln_buffer_view_t* view) {
  if (view) atomic_fetch_add_explicit(&view->refcount, 1, memory_order_relaxed);
}

void kiln_buffer_view_release(kiln_buffer_view_t* view) {
  if (!view) return;
  if (atomic_fetch_sub_explicit(&view->refcount, 1, memory_order_acq_rel) != 1) {
    return;
  }
  if (view->owned) {
    kiln_memory_free(view, view->mapped); /* header and data are one allocation */
  } else {
    if (view->keepalive_release) view->keepalive_release(view->keepalive);
    free(view);
  }
}

kiln_dtype_t kiln_buffer_view_dtype(const kiln_buffer_view_t* view) {
  return view->dtype;
}
size_t kiln_buffer_view_rank(const kiln_buffer_view_t* view) { return view->rank; }
const int64_t* kiln_buffer_view_shape(const kiln_buffer_view_t* view) {
  return view->shape;
}
size_t kiln_buffer_view_element_count(const kiln_buffer_view_t* view) {
  return view->element_count;
}
size_t kiln_buffer_view_byte_size(const kiln_buffer_view_t* view) {
  return view->byte_size;
}
const void* kiln_buffer_view_data(const kiln_buffer_view_t* view) {
  return view->data;
}
void* kiln_buffer_view_mutable_data(kiln_buffer_view_t* view) {
  /* Wrapped views (module constants used in place) are read-only, but for an arena's. */
  return view->writable_memory ? view->data : NULL;
}

void kiln_buffer_view_mark_writable_memory(kiln_buffer_view_t* view) { view->writable_memory = 1; }

void kiln_buffer_view_freeze(kiln_buffer_view_t* view) { view->frozen = 1; }

void kiln_buffer_view_mark_unwritten(kiln_buffer_view_t* view) { view->unwritten = 1; }
void kiln_buffer_view_mark_written(kiln_buffer_view_t* view) { view->unwritten = 0; }

void kiln_buffer_view_zero_if_unwritten(kiln_buffer_view_t* view) {
  if (!view->unwritten) return;
  /* Unwritten: nothing wrote it since it was allocated (buffer_internal.h),
   * and a fresh mapping of its own (memory.h) reads as zeros already, its
   * pages not even touched yet. */
  if (!(view->owned && view->mapped)) memset(view->data, 0, view->byte_size);
  view->unwritten = 0;
}
int kiln_buffer_view_is_frozen(const kiln_buffer_view_t* view) { return view->frozen; }

void kiln_buffer_view_thaw(kiln_buffer_view_t* view) { view->frozen = 0; }

int kiln_buffer_view_is_exclusive(kiln_buffer_view_t* view) {
  return atomic_load_explicit(&view->refcount, memory_order_acquire) == 1 &&
         kiln_buffer_view_mutable_data(view) != NULL;
}

int kiln_buffer_view_has_type(const kiln_buffer_view_t* view, kiln_dtype_t dtype,
                              size_t rank, const int64_t* shape) {
  if (!view || view->dtype != dtype || view->rank != rank) return 0;
  for (size_t i = 0; i < rank; ++i) {
    if (view->shape[i] != shape[i]) return 0;
  }
  return 1;
}
