/* The bytecode interpreter. Code has been verified when the module loaded, so
 * opcodes, operand indices, list lengths and branch targets are trusted here;
 * what remains to check at run time is values: unassigned registers, types
 * stored into globals or passed between functions, buffer sizes bound to
 * kernels, writability, the shapes and indices of buffer.row and
 * buffer.set_row, and the byte sizes of buffer.view. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_internal.h"
#include "bytecode.h"
#include "context_internal.h"
#include "debug_print.h"
#include "half.h"
#include "instance_internal.h"
#include "pool.h"
#include "status_internal.h"
#include "trace_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kiln modules are little-endian; this runtime supports little-endian hosts only"
#endif

/* A ref register: a view and whether kernels and buffer.set_row may write into
 * it: only buffers this invocation allocated (alloc, i.store), and only until
 * they are frozen (see ref_writable). Constants, globals' values, arguments and
 * row views are read-only. `external`: the memory is the caller's (an argument
 * of the outermost call, or a row view of one), which the caller may change
 * after the call, so global.store keeps a copy of it; or (KILN_REF_TRANSIENT)
 * the function's transient arena. */
typedef struct kiln_ref {
  kiln_buffer_view_t* view;
  uint8_t writable;
  uint8_t external;
} kiln_ref_t;

typedef struct kiln_frame {
  kiln_call_budget_t* budget; /* the call's limits, shared by its frames */
  const kiln_module_t* module;
  const kiln_function_info_t* fn;
  kiln_ref_t* r;
  int64_t* i;
  uint8_t* i_set;
  uint8_t* arena; /* the function's transient arena for this call (alloc.transient) */
} kiln_frame_t;

/* kiln_ref_t.external: 1 for the caller's memory, this for the call's transient
 * arena, which the next call reuses: global.store copies both, and a function
 * may not return the latter. */
#define KILN_REF_TRANSIENT 2

#define RUNTIME_ERROR(...) kiln_make_status(KILN_FAILED_PRECONDITION, __VA_ARGS__)

/* ---- scalar conversions ---------------------------------------------------- */

static int64_t double_to_i64(double d) {
  if (d != d) return 0;
  if (d >= 9223372036854775807.0) return INT64_MAX;
  if (d <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)d;
}

static int64_t load_i64(kiln_dtype_t dtype, const void* p) {
  union { float f32; double f64; int8_t i8; int16_t i16; int32_t i32; int64_t i64;
          uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; } v;
  memcpy(&v, p, kiln_dtype_size(dtype) < sizeof v ? kiln_dtype_size(dtype) : sizeof v);
  switch (dtype) {
    case KILN_DTYPE_F32: return double_to_i64(v.f32);
    case KILN_DTYPE_F64: return double_to_i64(v.f64);
    case KILN_DTYPE_I8: return v.i8;
    case KILN_DTYPE_I16: return v.i16;
    case KILN_DTYPE_I32: return v.i32;
    case KILN_DTYPE_I64: return v.i64;
    case KILN_DTYPE_U8: return v.u8;
    case KILN_DTYPE_U16: return v.u16;
    case KILN_DTYPE_U32: return v.u32;
    case KILN_DTYPE_U64: return (int64_t)v.u64; /* two's complement: wraps past INT64_MAX */
    case KILN_DTYPE_BOOL: return v.u8 != 0;
    case KILN_DTYPE_F16: return double_to_i64(kiln_half_to_float(v.u16));
    case KILN_DTYPE_BF16: return double_to_i64(kiln_bf16_to_float(v.u16));
    case KILN_DTYPE_C64: return double_to_i64(v.f32); /* the real part, which comes first */
    case KILN_DTYPE_C128: return double_to_i64(v.f64);
  }
  return 0;
}

static void store_i64(kiln_dtype_t dtype, void* p, int64_t x) {
  uint64_t u = (uint64_t)x;
  switch (dtype) {
    case KILN_DTYPE_F32: { float f = (float)x; memcpy(p, &f, 4); return; }
    case KILN_DTYPE_F64: { double d = (double)x; memcpy(p, &d, 8); return; }
    case KILN_DTYPE_BOOL: *(uint8_t*)p = x != 0; return;
    case KILN_DTYPE_F16: { uint16_t h = kiln_float_to_half((float)x); memcpy(p, &h, 2); return; }
    case KILN_DTYPE_BF16: { uint16_t h = kiln_float_to_bf16((float)x); memcpy(p, &h, 2); return; }
    case KILN_DTYPE_C64: { float f[2] = {(float)x, 0}; memcpy(p, f, 8); return; }
    case KILN_DTYPE_C128: { double d[2] = {(double)x, 0}; memcpy(p, d, 16); return; }
    default: memcpy(p, &u, kiln_dtype_size(dtype)); return; /* low bytes: wrapping */
  }
}

/* ---- registers ------------------------------------------------------------- */

/* The register as it is, without the read rule below: for mov, and for the
 * bindings a kernel writes in full. */
static kiln_status_t get_ref_raw(const kiln_frame_t* fr, uint32_t reg, kiln_ref_t* out) {
  if (!fr->r[reg].view)
    return RUNTIME_ERROR("register r%u read before assignment in function '%s'",
                         (unsigned)reg, fr->fn->name);
  *out = fr->r[reg];
  return NULL;
}

/* The register for a use that reads its buffer: an unwritten allocation is
 * zeroed first (buffer_internal.h). */
static kiln_status_t get_ref(const kiln_frame_t* fr, uint32_t reg, kiln_ref_t* out) {
  kiln_status_t s = get_ref_raw(fr, reg, out);
  if (!s && out->writable) kiln_buffer_view_zero_if_unwritten(out->view);
  return s;
}

static kiln_status_t get_i(const kiln_frame_t* fr, uint32_t reg, int64_t* out) {
  if (!fr->i_set[reg])
    return RUNTIME_ERROR("register i%u read before assignment in function '%s'",
                         (unsigned)reg, fr->fn->name);
  *out = fr->i[reg];
  return NULL;
}

/* Takes ownership of one reference to `view`. */
static void set_ref(kiln_frame_t* fr, uint32_t reg, kiln_buffer_view_t* view,
                    uint8_t writable, uint8_t external) {
  kiln_buffer_view_release(fr->r[reg].view);
  fr->r[reg].view = view;
  fr->r[reg].writable = writable;
  fr->r[reg].external = external;
}

/* Writable in place: made by this invocation and not frozen since (stored
 * into a global, or a row of it taken by buffer.row). Freezing marks the
 * buffer, so every register holding it, in any frame, sees it. */
static int ref_writable(kiln_ref_t ref) {
  return ref.writable && !kiln_buffer_view_is_frozen(ref.view);
}

/* Why ref_writable(ref) is false, for error messages. */
static const char* read_only_reason(kiln_ref_t ref) {
  return ref.writable ? "frozen: it was stored into a global or buffer.row took a row of it"
                      : "a constant, a global's value, an argument or a row view";
}

static void freeze(kiln_ref_t ref) {
  if (ref.writable) kiln_buffer_view_freeze(ref.view);
}

static void set_i(kiln_frame_t* fr, uint32_t reg, int64_t v) {
  fr->i[reg] = v;
  fr->i_set[reg] = 1;
}

static kiln_status_t type_mismatch(const kiln_module_t* m, const kiln_buffer_view_t* view,
                                   uint32_t type, const char* format, ...)
    __attribute__((format(printf, 4, 5)));
static kiln_status_t type_mismatch(const kiln_module_t* m, const kiln_buffer_view_t* view,
                                   uint32_t type, const char* format, ...) {
  char want[128], got[128], what[256];
  va_list ap;
  kiln_format_type_info(&m->types[type], want, sizeof want);
  kiln_format_view_type(view, got, sizeof got);
  va_start(ap, format);
  vsnprintf(what, sizeof what, format, ap);
  va_end(ap);
  return RUNTIME_ERROR("%s expects %s, got %s", what, want, got);
}

/* ---- the interpreter --------------------------------------------------------- */

static kiln_status_t run(kiln_context_t* c, kiln_call_budget_t* budget, uint32_t ordinal,
                         const kiln_ref_t* args, kiln_ref_t* results, int depth);

static void release_module(void* module) { kiln_module_release(module); }

/* Tells the context's dispatch observer (kiln_context_set_dispatch_observer)
 * about the dispatch at word `pc` of the frame's function, before the kernel
 * runs (`phase` KILN_DISPATCH_BEFORE: the inputs, which a kernel writing its
 * output over a dead input changes) and after it (KILN_DISPATCH_AFTER): its
 * kernel and every bound buffer. A nonzero answer stops the call. */
static kiln_status_t observe_dispatch(kiln_context_t* c, kiln_frame_t* fr, uint32_t pc,
                                      const kiln_bc_operand_t* op, void* const* bindings,
                                      kiln_dispatch_phase_t phase) {
  const kiln_kernel_info_t* k = &fr->module->kernels[op[0].value];
  size_t sizes_small[16];
  size_t* sizes = sizes_small;
  kiln_dispatch_info_t info;
  kiln_status_t s = NULL;
  uint32_t j;
  int answer;
  if (op[2].value > 16 && !(sizes = malloc(sizeof *sizes * op[2].value)))
    return kiln_make_status(KILN_OUT_OF_MEMORY, "dispatch of kernel '%s': allocating the "
                            "observer's binding sizes", k->name);
  for (j = 0; j < op[2].value; ++j) sizes[j] = kiln_buffer_view_byte_size(fr->r[op[2].list[j]].view);
  info.function.module = fr->module;
  info.function.ordinal = (uint32_t)(fr->fn - fr->module->functions);
  info.offset = pc;
  info.kernel = op[0].value;
  info.kernel_name = k->name;
  info.workgroup_count = op[1].value;
  info.binding_count = op[2].value;
  info.binding_data = (const void* const*)bindings;
  info.binding_sizes = sizes;
  info.binding_writable = k->binding_writable;
  info.phase = phase;
  answer = c->observer(c->observer_data, &info);
  if (answer)
    s = kiln_make_status(KILN_CANCELLED, "the dispatch observer stopped the call %s kernel "
                         "'%s' (it returned %d)", phase == KILN_DISPATCH_BEFORE ? "before" : "after",
                         k->name, answer);
  if (sizes != sizes_small) free(sizes);
  return s;
}

/* A dispatch while tracing: the dispatch event, then what each thread ran of
 * it (the pool's slices: room for every worker; none when that cannot be
 * allocated, the dispatch is still recorded). */
static kiln_status_t traced_dispatch(kiln_context_t* c, kiln_frame_t* fr,
                                     const kiln_kernel_info_t* k, const kiln_bc_operand_t* op,
                                     const kiln_dispatch_args_t* args) {
  kiln_pool_t* pool = kiln_instance_pool(c->module->instance);
  kiln_pool_slice_t* slices = malloc(sizeof *slices * kiln_pool_worker_count(pool));
  uint32_t slice_count = 0, j;
  uint64_t started = kiln_trace_now_ns();
  kiln_status_t s =
      kiln_pool_dispatch_traced(pool, k->name, k->fn, args, op[1].value, slices, &slice_count);
  if (!s) {
    kiln_trace_event_t e = {fr->module, started, kiln_trace_now_ns() - started, 0,
                            op[0].value, op[1].value, 0, 0, KILN_TRACE_DISPATCH};
    for (j = 0; j < op[2].value; ++j) e.bytes += kiln_buffer_view_byte_size(fr->r[op[2].list[j]].view);
    kiln_trace_record_dispatch(c->trace, &e, slices, slice_count);
  }
  free(slices);
  return s;
}

static kiln_status_t do_dispatch(kiln_context_t* c, kiln_frame_t* fr, uint32_t pc,
                                 const kiln_bc_operand_t* op) {
  const kiln_kernel_info_t* k = &fr->module->kernels[op[0].value];
  void* bind_small[16];
  int64_t push_small[16];
  void** bindings = bind_small;
  int64_t* push = push_small;
  kiln_dispatch_args_t args;
  kiln_status_t s = NULL;
  uint32_t j;
  if ((s = kiln_call_budget_check(fr->budget, "a dispatch"))) return s;
  if (op[2].value > 16) bindings = malloc(sizeof *bindings * op[2].value);
  if (op[3].value > 16) push = malloc(sizeof *push * op[3].value);
  if (!bindings || !push) {
    s = kiln_make_status(KILN_OUT_OF_MEMORY, "dispatch of kernel '%s': allocating arguments",
                         k->name);
    goto done;
  }
  for (j = 0; j < op[2].value && !s; ++j) {
    kiln_ref_t ref = {NULL, 0, 0};
    size_t size;
    if ((s = k->binding_writable[j] ? get_ref_raw(fr, op[2].list[j], &ref)
                                    : get_ref(fr, op[2].list[j], &ref)))
      break;
    size = kiln_buffer_view_byte_size(ref.view);
    if (size < k->binding_sizes[j])
      s = RUNTIME_ERROR("dispatch of kernel '%s': binding %u (r%u) is %zu bytes, the kernel "
                        "needs at least %llu", k->name, (unsigned)j,
                        (unsigned)op[2].list[j], size,
                        (unsigned long long)k->binding_sizes[j]);
    else if (k->binding_writable[j] && size != k->binding_sizes[j])
      s = RUNTIME_ERROR("dispatch of kernel '%s': binding %u (r%u) is %zu bytes, the kernel "
                        "writes exactly %llu (a written binding must be the size of its "
                        "buffer)", k->name, (unsigned)j, (unsigned)op[2].list[j], size,
                        (unsigned long long)k->binding_sizes[j]);
    else if (k->binding_writable[j] && !ref_writable(ref))
      s = RUNTIME_ERROR("dispatch of kernel '%s': binding %u (r%u) is written by the kernel "
                        "but holds a read-only buffer (%s)", k->name, (unsigned)j,
                        (unsigned)op[2].list[j], read_only_reason(ref));
    else
      bindings[j] = (void*)(uintptr_t)kiln_buffer_view_data(ref.view);
  }
  for (j = 0; j < op[3].value && !s; ++j) s = get_i(fr, op[3].list[j], &push[j]);
  if (s) goto done;
  args.bindings = bindings;
  args.push_constants = push;
  args.workgroup_count = op[1].value;
  args.last_level_cache_kib = kiln_instance_last_level_cache_kib(c->module->instance);
  if (c->observer && (s = observe_dispatch(c, fr, pc, op, bindings, KILN_DISPATCH_BEFORE)))
    goto done;
  if (!c->trace)
    s = kiln_pool_dispatch(kiln_instance_pool(c->module->instance), k->name, k->fn, &args,
                           op[1].value);
  else
    s = traced_dispatch(c, fr, k, op, &args);
  /* The kernel wrote every byte of its writable bindings (kernel_abi.h). */
  for (j = 0; j < op[2].value && !s; ++j)
    if (k->binding_writable[j]) kiln_buffer_view_mark_written(fr->r[op[2].list[j]].view);
  if (c->observer && !s) s = observe_dispatch(c, fr, pc, op, bindings, KILN_DISPATCH_AFTER);
done:
  if (bindings != bind_small) free(bindings);
  if (push != push_small) free(push);
  return s;
}

static kiln_status_t do_call(kiln_context_t* c, kiln_frame_t* fr,
                             const kiln_bc_operand_t* op, int depth) {
  const kiln_function_info_t* g = &fr->module->functions[op[0].value];
  kiln_ref_t* buf;
  kiln_status_t s = NULL;
  uint32_t j, n = op[1].value + op[2].value;
  if (depth + 1 >= KILN_VM_MAX_CALL_DEPTH)
    return RUNTIME_ERROR("call depth limit (%d) exceeded calling '%s'",
                         KILN_VM_MAX_CALL_DEPTH, g->name);
  if ((s = kiln_call_budget_check(fr->budget, "a call"))) return s;
  buf = calloc(n ? n : 1, sizeof *buf);
  if (!buf) return kiln_make_status(KILN_OUT_OF_MEMORY, "calling '%s'", g->name);
  for (j = 0; j < op[1].value && !s; ++j) {
    if ((s = get_ref(fr, op[1].list[j], &buf[j]))) break;
    if (!kiln_view_has_module_type(fr->module, buf[j].view, g->arg_types[j]))
      s = type_mismatch(fr->module, buf[j].view, g->arg_types[j],
                        "call of '%s': argument %u '%s'", g->name, (unsigned)j,
                        g->args[j].name);
  }
  if (!s) s = run(c, fr->budget, op[0].value, buf, buf + op[1].value, depth + 1);
  if (!s)
    for (j = 0; j < op[2].value; ++j) {
      kiln_ref_t* r = &buf[op[1].value + j];
      set_ref(fr, op[2].list[j], r->view, r->writable, r->external);
    }
  free(buf);
  return s;
}

static kiln_status_t do_ret(kiln_frame_t* fr, const kiln_bc_operand_t* op,
                            kiln_ref_t* results) {
  const kiln_function_info_t* f = fr->fn;
  kiln_status_t s;
  uint32_t j;
  for (j = 0; j < op[0].value; ++j) {
    if ((s = get_ref(fr, op[0].list[j], &results[j]))) return s;
    if (results[j].external == KILN_REF_TRANSIENT)
      return RUNTIME_ERROR("'%s' result %u '%s' lies in the function's transient arena, which "
                           "the next call reuses: a function may not return it", f->name,
                           (unsigned)j, f->results[j].name);
    if (!kiln_view_has_module_type(fr->module, results[j].view, f->result_types[j]))
      return type_mismatch(fr->module, results[j].view, f->result_types[j],
                           "'%s' result %u '%s'", f->name, (unsigned)j,
                           f->results[j].name);
  }
  for (j = 0; j < op[0].value; ++j) kiln_buffer_view_retain(results[j].view);
  return NULL;
}

/* ---- rows -------------------------------------------------------------------- */

static void release_view(void* view) { kiln_buffer_view_release(view); }

/* Checks that `view` (register r`reg`, the op's operand `what`) has a leading
 * axis and that `index` (register i`ireg`) is inside it. */
static kiln_status_t check_row(const char* op, const char* what, uint32_t reg,
                               const kiln_buffer_view_t* view, uint32_t ireg,
                               int64_t index) {
  char type[128];
  int64_t rows;
  if (kiln_buffer_view_rank(view) == 0) {
    kiln_format_view_type(view, type, sizeof type);
    return RUNTIME_ERROR("%s: %s r%u is a 0-d buffer (%s), expected rank >= 1", op, what,
                         (unsigned)reg, type);
  }
  rows = kiln_buffer_view_shape(view)[0];
  if (index < 0 || index >= rows) {
    kiln_format_view_type(view, type, sizeof type);
    return RUNTIME_ERROR("%s: index i%u = %lld is out of range for %s r%u of type %s: "
                         "expected 0 <= index < %lld", op, (unsigned)ireg, (long long)index,
                         what, (unsigned)reg, type, (long long)rows);
  }
  return NULL;
}

/* Bytes of one row of `view` (rank >= 1, at least one row). */
static size_t row_bytes(const kiln_buffer_view_t* view) {
  return kiln_buffer_view_byte_size(view) / (size_t)kiln_buffer_view_shape(view)[0];
}

/* buffer.row dst, src, index. The row is a view into src's memory when the
 * module's kernels need only element-aligned bindings (kernel_abi.h), or when
 * it starts on a KILN_BUFFER_ALIGN boundary; else (kernels compiled before
 * format 2.1) a copy into a new aligned buffer. Either way dst is read-only,
 * and src (unless it lies in the transient arena) is frozen so that the row
 * cannot change under its reader: the two cases cannot be told apart. */
static kiln_status_t do_row(kiln_frame_t* fr, const kiln_bc_operand_t* op) {
  kiln_ref_t src = {NULL, 0, 0};
  kiln_buffer_view_t* v = NULL;
  const int64_t* shape;
  const char* base;
  uint8_t external = 0; /* a copy is the VM's own */
  size_t rank, bytes, offset;
  int64_t index = 0;
  kiln_dtype_t dtype;
  kiln_status_t s;
  if ((s = get_ref(fr, op[1].value, &src)) || (s = get_i(fr, op[2].value, &index))) return s;
  if ((s = check_row("buffer.row", "src", op[1].value, src.view, op[2].value, index)))
    return s;
  dtype = kiln_buffer_view_dtype(src.view);
  rank = kiln_buffer_view_rank(src.view);
  shape = kiln_buffer_view_shape(src.view);
  bytes = row_bytes(src.view);
  offset = (size_t)index * bytes; /* <= byte_size - bytes: no overflow */
  base = kiln_buffer_view_data(src.view);
  if (fr->module->element_aligned_bindings ||
      ((uintptr_t)base + offset) % KILN_BUFFER_ALIGN == 0) {
    /* offset is 0 whenever base may be NULL (an empty constant). */
    void* data = (void*)(uintptr_t)(offset ? base + offset : base);
    kiln_buffer_view_retain(src.view);
    s = kiln_buffer_view_wrap(dtype, rank - 1, shape + 1, data, bytes, release_view,
                              src.view, &v);
    if (s) {
      kiln_buffer_view_release(src.view);
      return s;
    }
    external = src.external;
  } else {
    /* offset != 0, so bytes != 0 and base is not NULL. */
    if ((s = kiln_buffer_view_allocate(dtype, rank - 1, shape + 1, &v))) return s;
    memcpy(kiln_buffer_view_mutable_data(v), base + offset, bytes);
  }
  /* A buffer in the transient arena is not frozen (format 2.7): which bytes of
   * the arena hold what is the compiler's plan, as for alloc.transient, and a
   * loop writes its carries' arena buffers again after the rows of an earlier
   * value were read. Before set_ref: dst may be src's register. */
  if (src.external != KILN_REF_TRANSIENT) freeze(src);
  set_ref(fr, op[0].value, v, 0, external);
  return NULL;
}

/* buffer.set_row dst, index, src: copies src into row `index` of dst. */
static kiln_status_t do_set_row(kiln_frame_t* fr, const kiln_bc_operand_t* op) {
  kiln_ref_t dst = {NULL, 0, 0}, src = {NULL, 0, 0};
  const int64_t* shape;
  size_t rank, bytes;
  int64_t index = 0;
  char* out;
  kiln_status_t s;
  if ((s = get_ref(fr, op[0].value, &dst)) || (s = get_i(fr, op[1].value, &index)) ||
      (s = get_ref(fr, op[2].value, &src)))
    return s;
  if ((s = check_row("buffer.set_row", "dst", op[0].value, dst.view, op[1].value, index)))
    return s;
  if (!ref_writable(dst))
    return RUNTIME_ERROR("buffer.set_row: dst r%u holds a read-only buffer (%s), expected "
                         "one this invocation allocated", (unsigned)op[0].value,
                         read_only_reason(dst));
  rank = kiln_buffer_view_rank(dst.view);
  shape = kiln_buffer_view_shape(dst.view);
  if (!kiln_buffer_view_has_type(src.view, kiln_buffer_view_dtype(dst.view), rank - 1,
                                 shape + 1)) {
    char want[128], got[128], whole[128];
    kiln_format_type(kiln_buffer_view_dtype(dst.view), rank - 1, shape + 1, want,
                     sizeof want);
    kiln_format_view_type(src.view, got, sizeof got);
    kiln_format_view_type(dst.view, whole, sizeof whole);
    return RUNTIME_ERROR("buffer.set_row: src r%u is %s, expected %s (a row of dst r%u, "
                         "%s)", (unsigned)op[2].value, got, want, (unsigned)op[0].value,
                         whole);
  }
  out = kiln_buffer_view_mutable_data(dst.view);
  if (!out)
    return kiln_make_status(KILN_INTERNAL, "buffer.set_row: dst r%u is writable but does "
                            "not own its memory", (unsigned)op[0].value);
  bytes = row_bytes(dst.view);
  /* src is never a view of dst (that would have frozen dst); memmove anyway. */
  if (bytes) memmove(out + (size_t)index * bytes, kiln_buffer_view_data(src.view), bytes);
  return NULL;
}

/* buffer.view dst, src, t: src's memory read as type t (same byte size). dst is
 * read-only and src is frozen, as for buffer.row, so neither changes under the
 * other. */
static kiln_status_t do_view(kiln_frame_t* fr, const kiln_bc_operand_t* op) {
  const kiln_type_info_t* t = &fr->module->types[op[2].value];
  kiln_ref_t src = {NULL, 0, 0};
  kiln_buffer_view_t* v = NULL;
  kiln_status_t s;
  if ((s = get_ref(fr, op[1].value, &src))) return s;
  if (kiln_buffer_view_byte_size(src.view) != t->byte_size) {
    char want[128], got[128];
    kiln_format_type_info(t, want, sizeof want);
    kiln_format_view_type(src.view, got, sizeof got);
    return RUNTIME_ERROR("buffer.view: src r%u is %s (%zu bytes), which cannot be viewed as "
                         "%s (%zu bytes)", (unsigned)op[1].value, got,
                         kiln_buffer_view_byte_size(src.view), want, (size_t)t->byte_size);
  }
  kiln_buffer_view_retain(src.view);
  s = kiln_buffer_view_wrap(t->dtype, t->rank, t->shape,
                            (void*)(uintptr_t)kiln_buffer_view_data(src.view), t->byte_size,
                            release_view, src.view, &v);
  if (s) {
    kiln_buffer_view_release(src.view);
    return s;
  }
  freeze(src); /* before set_ref: dst may be src's register */
  set_ref(fr, op[0].value, v, 0, src.external);
  return NULL;
}

/* buffer.copy dst, src (format 2.7): src's bytes into dst, in place. The
 * compiler writes a loop's final carry, or a branch's result, into the buffer
 * it planned for the value; usually the last iteration or the branch already
 * wrote it there, and then dst and src are the same memory and nothing is
 * copied. */
static kiln_status_t do_copy(kiln_frame_t* fr, const kiln_bc_operand_t* op) {
  kiln_ref_t dst = {NULL, 0, 0}, src = {NULL, 0, 0};
  const void* from;
  char* to;
  size_t bytes;
  kiln_status_t s;
  if ((s = get_ref_raw(fr, op[0].value, &dst)) || (s = get_ref(fr, op[1].value, &src)))
    return s;
  if (!ref_writable(dst))
    return RUNTIME_ERROR("buffer.copy: dst r%u holds a read-only buffer (%s), expected one "
                         "this invocation allocated", (unsigned)op[0].value,
                         read_only_reason(dst));
  if (!kiln_buffer_view_has_type(src.view, kiln_buffer_view_dtype(dst.view),
                                 kiln_buffer_view_rank(dst.view),
                                 kiln_buffer_view_shape(dst.view))) {
    char want[128], got[128];
    kiln_format_view_type(dst.view, want, sizeof want);
    kiln_format_view_type(src.view, got, sizeof got);
    return RUNTIME_ERROR("buffer.copy: src r%u is %s, expected dst r%u's type %s",
                         (unsigned)op[1].value, got, (unsigned)op[0].value, want);
  }
  to = kiln_buffer_view_mutable_data(dst.view);
  bytes = kiln_buffer_view_byte_size(dst.view);
  if (!to && bytes)
    return kiln_make_status(KILN_INTERNAL, "buffer.copy: dst r%u is writable but does "
                            "not own its memory", (unsigned)op[0].value);
  from = kiln_buffer_view_data(src.view);
  /* Distinct buffers the VM made never overlap in part: the same memory or none. */
  if (bytes && (const void*)to != from) memmove(to, from, bytes);
  kiln_buffer_view_mark_written(dst.view);
  return NULL;
}

/* debug.print format, values (format 2.8): the template filled in with the
 * values, one line to the context's print sink (stdout by default), now: in
 * program order with the call's dispatches, which are synchronous. */
static kiln_status_t do_print(kiln_context_t* c, kiln_frame_t* fr, const kiln_bc_operand_t* op) {
  const kiln_constant_info_t* k = &fr->module->constants[op[0].value];
  const kiln_buffer_view_t* local[8];
  const kiln_buffer_view_t** views = local;
  char* text = NULL;
  size_t len = 0;
  uint32_t j, count = op[1].value;
  kiln_status_t s;
  /* A host step, like a dispatch: where a cancelled or late call stops. */
  if ((s = kiln_call_budget_check(fr->budget, "a debug.print"))) return s;
  if (count > 8 && !(views = malloc(count * sizeof *views)))
    return kiln_make_status(KILN_OUT_OF_MEMORY, "debug.print of %u values", (unsigned)count);
  for (j = 0; j < count && !s; j++) {
    kiln_ref_t ref = {NULL, 0, 0};
    if (!(s = get_ref(fr, op[1].list[j], &ref))) views[j] = ref.view;
  }
  if (!s)
    s = kiln_debug_print_format((const uint8_t*)k->data, (size_t)fr->module->types[k->type].byte_size,
                                views, count, KILN_DEBUG_PRINT_MAX_LINE, &text, &len);
  if (!s) {
    if (c->print_callback) {
      int answer = c->print_callback(c->print_data, text, len);
      if (answer)
        s = kiln_make_status(KILN_CANCELLED, "the print callback stopped the call (it returned "
                             "%d)", answer);
    } else {
      fwrite(text, 1, len, stdout);
      fflush(stdout);
    }
  }
  free(text);
  if (views != local) free(views);
  return s;
}

/* debug.callback callback, values (format 2.8): the context's host callback
 * with the values, now. */
static kiln_status_t do_host_callback(kiln_context_t* c, kiln_frame_t* fr,
                                      const kiln_bc_operand_t* op) {
  const kiln_buffer_view_t* local[8];
  const kiln_buffer_view_t** views = local;
  uint32_t j, count = op[1].value;
  kiln_status_t s = NULL;
  int answer;
  if ((s = kiln_call_budget_check(fr->budget, "a debug.callback"))) return s;
  if (!c->host_callback)
    return RUNTIME_ERROR("debug.callback %u: the module calls back into its host, but no host "
                         "callback is set on the context (kiln_context_set_host_callback)",
                         (unsigned)op[0].value);
  if (count > 8 && !(views = malloc(count * sizeof *views)))
    return kiln_make_status(KILN_OUT_OF_MEMORY, "debug.callback of %u values", (unsigned)count);
  for (j = 0; j < count && !s; j++) {
    kiln_ref_t ref = {NULL, 0, 0};
    if (!(s = get_ref(fr, op[1].list[j], &ref))) views[j] = ref.view;
  }
  if (!s && (answer = c->host_callback(c->host_data, op[0].value, views, count)))
    s = kiln_make_status(KILN_CANCELLED, "the host callback stopped the call at debug.callback "
                         "%u (it returned %d)", (unsigned)op[0].value, answer);
  if (views != local) free(views);
  return s;
}

/* ---- one instruction ----------------------------------------------------------- */

static kiln_status_t step(kiln_context_t* c, kiln_frame_t* fr, const kiln_bc_instr_t* in,
                          kiln_ref_t* results, int depth, uint32_t* pc, int* done) {
  const kiln_module_t* m = fr->module;
  const kiln_bc_operand_t* op = in->operands;
  kiln_buffer_view_t* v = NULL;
  kiln_ref_t ref = {NULL, 0, 0};
  int64_t a = 0, b = 0;
  kiln_status_t s = NULL;
  *pc = in->next_pc;
  switch ((kiln_opcode_t)in->opcode) {
    case KILN_OP_ALLOC: {
      const kiln_type_info_t* t = &m->types[op[1].value];
      if ((s = kiln_buffer_view_allocate(t->dtype, t->rank, t->shape, &v))) return s;
      kiln_buffer_view_mark_unwritten(v);
      set_ref(fr, op[0].value, v, 1, 0);
      if (c->trace) {
        kiln_trace_event_t e = {m, kiln_trace_now_ns(), 0, t->byte_size, op[1].value, 0, 0,
                                0, KILN_TRACE_ALLOC};
        kiln_trace_record(c->trace, &e);
      }
      return NULL;
    }
    case KILN_OP_ALLOC_RESULT: {
      const kiln_type_info_t* t = &m->types[op[1].value];
      void* memory = depth == 0 && c->result_memory ? c->result_memory[op[2].value] : NULL;
      if (!memory) {
        if ((s = kiln_buffer_view_allocate(t->dtype, t->rank, t->shape, &v))) return s;
        kiln_buffer_view_mark_unwritten(v);
        set_ref(fr, op[0].value, v, 1, 0);
        return NULL;
      }
      if ((s = kiln_buffer_view_wrap(t->dtype, t->rank, t->shape, memory, t->byte_size, NULL,
                                     NULL, &v)))
        return s;
      kiln_buffer_view_mark_writable_memory(v);
      kiln_buffer_view_mark_unwritten(v);
      set_ref(fr, op[0].value, v, 1, 1); /* the caller's memory: global.store copies it */
      return NULL;
    }
    case KILN_OP_ALLOC_TRANSIENT: {
      const kiln_type_info_t* t = &m->types[op[1].value];
      if (t->byte_size == 0) {
        if ((s = kiln_buffer_view_allocate(t->dtype, t->rank, t->shape, &v))) return s;
      } else if ((s = kiln_buffer_view_wrap(t->dtype, t->rank, t->shape, fr->arena + op[2].imm64,
                                            t->byte_size, NULL, NULL, &v))) {
        return s;
      }
      kiln_buffer_view_mark_writable_memory(v);
      kiln_buffer_view_mark_unwritten(v);
      set_ref(fr, op[0].value, v, 1, t->byte_size ? KILN_REF_TRANSIENT : 0);
      return NULL;
    }
    case KILN_OP_CONST: {
      const kiln_constant_info_t* k = &m->constants[op[1].value];
      const kiln_type_info_t* t = &m->types[k->type];
      kiln_module_retain((kiln_module_t*)(uintptr_t)m);
      s = kiln_buffer_view_wrap(t->dtype, t->rank, t->shape, (void*)(uintptr_t)k->data,
                                t->byte_size, release_module, (void*)(uintptr_t)m, &v);
      if (s) {
        kiln_module_release((kiln_module_t*)(uintptr_t)m);
        return s;
      }
      set_ref(fr, op[0].value, v, 0, 0);
      return NULL;
    }
    case KILN_OP_GLOBAL_LOAD:
      kiln_buffer_view_retain(c->globals[op[1].value]);
      set_ref(fr, op[0].value, c->globals[op[1].value], 0, 0);
      return NULL;
    case KILN_OP_GLOBAL_TAKE: {
      /* The global's own buffer when only the context holds it (no register,
       * result, row view, caller or other context does) and the runtime owns
       * its memory: the kernel that follows updates the global in place. */
      kiln_buffer_view_t* g = c->globals[op[1].value];
      if (kiln_buffer_view_is_exclusive(g)) {
        kiln_buffer_view_thaw(g);
        kiln_buffer_view_retain(g);
        v = g;
      } else if ((s = kiln_buffer_view_create(kiln_buffer_view_dtype(g), kiln_buffer_view_rank(g),
                                              kiln_buffer_view_shape(g), kiln_buffer_view_data(g),
                                              kiln_buffer_view_byte_size(g), &v))) {
        return kiln_status_annotate(s, "global.take: copying global '%s'",
                                    m->globals[op[1].value].info.name);
      }
      set_ref(fr, op[0].value, v, 1, 0);
      return NULL;
    }
    case KILN_OP_GLOBAL_STORE: {
      const kiln_global_info_t* g = &m->globals[op[0].value];
      if ((s = get_ref(fr, op[1].value, &ref))) return s;
      if (!kiln_view_has_module_type(m, ref.view, g->type))
        return type_mismatch(m, ref.view, g->type, "global.store: global %u '%s'",
                             (unsigned)op[0].value, g->info.name);
      if (ref.external && kiln_buffer_view_is_exclusive(c->globals[op[0].value]) &&
          kiln_view_has_module_type(m, c->globals[op[0].value], g->type)) {
        /* The caller's memory or the arena, and only the context holds the
         * global's own buffer (no register, result, row view, caller or other
         * context does): the copy goes into that buffer in place, so a
         * steady-state call storing an arena value allocates nothing. The
         * same memory or none (a row of the global would hold a reference). */
        kiln_buffer_view_t* own = c->globals[op[0].value];
        size_t bytes = kiln_buffer_view_byte_size(own);
        const void* from = kiln_buffer_view_data(ref.view);
        void* to = kiln_buffer_view_mutable_data(own);
        if (bytes && to != from) memmove(to, from, bytes);
        v = own;
        kiln_buffer_view_retain(v);
      } else if (ref.external) {
        /* The caller may write into its memory after the call, or pass it to
         * other contexts: the global keeps its own copy. */
        const kiln_buffer_view_t* x = ref.view;
        if ((s = kiln_buffer_view_create(kiln_buffer_view_dtype(x), kiln_buffer_view_rank(x),
                                         kiln_buffer_view_shape(x), kiln_buffer_view_data(x),
                                         kiln_buffer_view_byte_size(x), &v)))
          return kiln_status_annotate(s, "global.store: copying into global '%s'",
                                      g->info.name);
      } else {
        v = ref.view;
        kiln_buffer_view_retain(v);
        freeze(ref); /* now the global's value: no writes in place, through any register */
        fr->r[op[1].value].writable = 0;
      }
      kiln_buffer_view_release(c->globals[op[0].value]);
      c->globals[op[0].value] = v;
      if (c->trace) {
        kiln_trace_event_t e = {m, kiln_trace_now_ns(), 0, kiln_buffer_view_byte_size(v),
                                op[0].value, 0, 0, 0, KILN_TRACE_GLOBAL_STORE};
        kiln_trace_record(c->trace, &e);
      }
      return NULL;
    }
    case KILN_OP_DISPATCH: return do_dispatch(c, fr, in->pc, op);
    case KILN_OP_CALL: return do_call(c, fr, op, depth);
    case KILN_OP_RET:
      *done = 1;
      return do_ret(fr, op, results);
    case KILN_OP_MOV:
      if ((s = get_ref_raw(fr, op[1].value, &ref))) return s;
      kiln_buffer_view_retain(ref.view);
      set_ref(fr, op[0].value, ref.view, ref.writable, ref.external);
      return NULL;
    case KILN_OP_BR:
      *pc = op[0].value;
      return *pc <= in->pc ? kiln_call_budget_check(fr->budget, "a backward branch") : NULL;
    case KILN_OP_BR_IF:
      if ((s = get_i(fr, op[0].value, &a))) return s;
      *pc = a ? op[1].value : op[2].value;
      return *pc <= in->pc ? kiln_call_budget_check(fr->budget, "a backward branch") : NULL;
    case KILN_OP_I_CONST:
      set_i(fr, op[0].value, op[1].imm64);
      return NULL;
    case KILN_OP_I_LOAD:
      if ((s = get_ref(fr, op[1].value, &ref))) return s;
      if (kiln_buffer_view_element_count(ref.view) == 0)
        return RUNTIME_ERROR("i.load: r%u is an empty buffer", (unsigned)op[1].value);
      set_i(fr, op[0].value,
            load_i64(kiln_buffer_view_dtype(ref.view), kiln_buffer_view_data(ref.view)));
      return NULL;
    case KILN_OP_I_ADD: case KILN_OP_I_SUB: case KILN_OP_I_MUL:
    case KILN_OP_I_LT: case KILN_OP_I_LE: case KILN_OP_I_EQ: case KILN_OP_I_NE: {
      uint64_t ua, ub, r = 0;
      if ((s = get_i(fr, op[1].value, &a)) || (s = get_i(fr, op[2].value, &b))) return s;
      ua = (uint64_t)a;
      ub = (uint64_t)b;
      switch ((kiln_opcode_t)in->opcode) {
        case KILN_OP_I_ADD: r = ua + ub; break;
        case KILN_OP_I_SUB: r = ua - ub; break;
        case KILN_OP_I_MUL: r = ua * ub; break;
        case KILN_OP_I_LT: r = a < b; break;
        case KILN_OP_I_LE: r = a <= b; break;
        case KILN_OP_I_EQ: r = a == b; break;
        default: r = a != b; break;
      }
      set_i(fr, op[0].value, r > (uint64_t)INT64_MAX ? -(int64_t)(~r) - 1 : (int64_t)r);
      return NULL;
    }
    case KILN_OP_I_STORE: {
      const kiln_type_info_t* t = &m->types[op[2].value];
      if ((s = get_i(fr, op[1].value, &a))) return s;
      if ((s = kiln_buffer_view_allocate(t->dtype, 0, NULL, &v))) return s;
      store_i64(t->dtype, kiln_buffer_view_mutable_data(v), a);
      set_ref(fr, op[0].value, v, 1, 0);
      return NULL;
    }
    case KILN_OP_BUFFER_ROW: return do_row(fr, op);
    case KILN_OP_BUFFER_SET_ROW: return do_set_row(fr, op);
    case KILN_OP_BUFFER_VIEW: return do_view(fr, op);
    case KILN_OP_BUFFER_COPY: return do_copy(fr, op);
    case KILN_OP_DEBUG_PRINT: return do_print(c, fr, op);
    case KILN_OP_DEBUG_CALLBACK: return do_host_callback(c, fr, op);
    case KILN_OP_INVALID:
      break;
  }
  return kiln_make_status(KILN_INTERNAL, "unhandled opcode %u", (unsigned)in->opcode);
}

static kiln_status_t run(kiln_context_t* c, kiln_call_budget_t* budget, uint32_t ordinal,
                         const kiln_ref_t* args, kiln_ref_t* results, int depth) {
  const kiln_module_t* m = c->module;
  const kiln_function_info_t* f = &m->functions[ordinal];
  kiln_frame_t fr;
  kiln_bc_instr_t in;
  kiln_status_t s = NULL;
  uint32_t pc = 0, j;
  int done = 0;
  char err[160];
  uint8_t* own_arena = NULL; /* a nested call's arena, freed on return */
  int own_mapped = 0;
  uint64_t started = c->trace ? kiln_trace_now_ns() : 0;
  fr.budget = budget;
  fr.module = m;
  fr.fn = f;
  fr.arena = NULL;
  if (f->transient_size) {
    if (c->arena_busy[ordinal]) {
      /* Freed on return, so mapped only where glibc would map it too (memory.h). */
      own_mapped = kiln_memory_is_mapped((size_t)f->transient_size, KILN_MAPPED_BUFFER_MIN);
      fr.arena = own_arena = kiln_memory_alloc((size_t)f->transient_size, own_mapped);
    } else {
      if (!c->arenas[ordinal])
        c->arenas[ordinal] = kiln_memory_alloc((size_t)f->transient_size,
                                               kiln_arena_mapped(f->transient_size));
      fr.arena = c->arenas[ordinal];
      if (fr.arena) c->arena_busy[ordinal] = 1;
    }
    if (!fr.arena)
      return kiln_make_status(KILN_OUT_OF_MEMORY, "function '%s': allocating its %llu-byte "
                              "transient arena", f->name, (unsigned long long)f->transient_size);
  }
  fr.r = calloc(f->ref_count ? f->ref_count : 1, sizeof *fr.r);
  fr.i = calloc(f->i64_count ? f->i64_count : 1, sizeof *fr.i);
  fr.i_set = calloc(f->i64_count ? f->i64_count : 1, 1);
  if (!fr.r || !fr.i || !fr.i_set) {
    s = kiln_make_status(KILN_OUT_OF_MEMORY, "function '%s': allocating %u+%u registers",
                         f->name, (unsigned)f->ref_count, (unsigned)f->i64_count);
    goto out;
  }
  for (j = 0; j < f->arg_count; ++j) {
    kiln_buffer_view_retain(args[j].view);
    fr.r[j] = args[j];
  }
  while (!done) {
    if (!kiln_bc_decode(f->code, f->code_len, pc, &in, err, sizeof err)) {
      s = kiln_make_status(KILN_INTERNAL, "function '%s': %s", f->name, err);
      break;
    }
    /* A global.store is never where the step limit stops a call: it follows
     * the dispatch that updated its global in place (global.take), so the
     * global changes exactly when it is stored; the next instruction stops. */
    if (budget->steps_left == 0 && in.opcode != KILN_OP_GLOBAL_STORE) {
      s = kiln_make_status(KILN_DEADLINE_EXCEEDED, "call ran past its limit of %llu "
                           "bytecode instructions", (unsigned long long)c->limits.max_steps);
      s = kiln_status_annotate(s, "in function '%s' at word %u (%s)", f->name,
                               (unsigned)in.pc, in.info->name);
      break;
    }
    if (budget->steps_left) budget->steps_left--;
    s = step(c, &fr, &in, results, depth, &pc, &done);
    if (s) {
      s = kiln_status_annotate(s, "in function '%s' at word %u (%s)", f->name,
                               (unsigned)in.pc, in.info->name);
      break;
    }
  }
out:
  if (fr.r)
    for (j = 0; j < f->ref_count; ++j) kiln_buffer_view_release(fr.r[j].view);
  free(fr.r);
  free(fr.i);
  free(fr.i_set);
  if (own_arena) kiln_memory_free(own_arena, own_mapped);
  else if (fr.arena) c->arena_busy[ordinal] = 0;
  if (c->trace && !s) {
    kiln_trace_event_t e = {m, started, kiln_trace_now_ns() - started, 0, ordinal, 0, 0,
                            (uint16_t)depth, KILN_TRACE_CALL};
    kiln_trace_record(c->trace, &e);
  }
  return s;
}

kiln_status_t kiln_vm_invoke(kiln_context_t* context, uint32_t ordinal,
                             kiln_buffer_view_t* const* args,
                             kiln_buffer_view_t** results, kiln_call_budget_t* budget) {
  const kiln_function_info_t* f = &context->module->functions[ordinal];
  kiln_ref_t* buf = calloc(f->arg_count + f->result_count + 1, sizeof *buf);
  kiln_status_t s;
  uint32_t j;
  if (!buf) return kiln_make_status(KILN_OUT_OF_MEMORY, "%s: allocating arguments", f->name);
  for (j = 0; j < f->arg_count; ++j) {
    buf[j].view = args[j];
    buf[j].external = 1;
  }
  s = run(context, budget, ordinal, buf, buf + f->arg_count, 0);
  if (!s)
    for (j = 0; j < f->result_count; ++j) results[j] = buf[f->arg_count + j].view;
  free(buf);
  return s;
}

void kiln_context_set_print_callback(kiln_context_t* context, kiln_print_callback_t callback,
                                     void* user_data) {
  if (!context) return;
  context->print_callback = callback;
  context->print_data = user_data;
}

void kiln_context_set_host_callback(kiln_context_t* context, kiln_host_callback_t callback,
                                    void* user_data) {
  if (!context) return;
  context->host_callback = callback;
  context->host_data = user_data;
}

void kiln_context_set_dispatch_observer(kiln_context_t* context,
                                        kiln_dispatch_observer_t observer, void* user_data) {
  if (!context) return;
  context->observer = observer;
  context->observer_data = user_data;
}
