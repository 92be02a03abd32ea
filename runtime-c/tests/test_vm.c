/* Loader, verifier and VM tests on the modules of vm_test_modules.h (no
 * kernels, so they run on any host). Returns non-zero on the first failure. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checksum.h"
#include "kiln/runtime.h"
#include "vm_test_modules.h"

static int failures = 0;

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                      \
    }                                                                  \
  } while (0)

#define OK(expr)                                                       \
  do {                                                                 \
    kiln_status_t s_ = (expr);                                         \
    if (s_) {                                                          \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, \
              kiln_status_message(s_));                                \
      kiln_status_free(s_);                                            \
      failures++;                                                      \
    }                                                                  \
  } while (0)

/* Checks that `s` failed with `code` and a message containing `text`. */
static void expect_error(kiln_status_t s, kiln_status_code_t code, const char* text,
                         int line) {
  if (!s) {
    fprintf(stderr, "line %d: expected %s error containing \"%s\", got OK\n", line,
            kiln_status_code_name(code), text);
    failures++;
    return;
  }
  if (kiln_status_code(s) != code || !strstr(kiln_status_message(s), text)) {
    fprintf(stderr, "line %d: expected %s containing \"%s\", got %s: %s\n", line,
            kiln_status_code_name(code), text, kiln_status_code_name(kiln_status_code(s)),
            kiln_status_message(s));
    failures++;
  }
  kiln_status_free(s);
}
#define EXPECT_ERROR(expr, code, text) expect_error((expr), (code), (text), __LINE__)

static kiln_buffer_view_t* scalar_i64(int64_t v) {
  kiln_buffer_view_t* view = NULL;
  OK(kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &v, sizeof v, &view));
  return view;
}

static int64_t read_i64(const kiln_buffer_view_t* view) {
  int64_t v;
  memcpy(&v, kiln_buffer_view_data(view), sizeof v);
  return v;
}

/* Calls a function of one or zero i64 arguments returning one i64. */
static int64_t call_i64(kiln_context_t* c, kiln_module_t* m, const char* name, int has_arg,
                        int64_t arg) {
  kiln_function_t f;
  kiln_buffer_view_t* in = has_arg ? scalar_i64(arg) : NULL;
  kiln_buffer_view_t* out = NULL;
  int64_t v = -999;
  OK(kiln_module_lookup_function(m, name, &f));
  OK(kiln_context_invoke(c, f, &in, has_arg ? 1 : 0, &out, 1));
  if (out) v = read_i64(out);
  kiln_buffer_view_release(in);
  kiln_buffer_view_release(out);
  return v;
}

/* Whether the file holds `text`. */
static int file_contains(const char* path, const char* text) {
  char buf[8192];
  FILE* f = fopen(path, "rb");
  size_t n;
  if (!f) return 0;
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strstr(buf, text) != NULL;
}

/* Tracing: calls (nested ones at depth 1), global stores and allocations are
 * recorded only while a trace is set; the trace outlives its context and
 * module; its JSON names them. */
static void test_trace(kiln_module_t* m) {
  kiln_trace_t* t = NULL;
  kiln_context_t* c = NULL;
  uint64_t calls = 0;
  const char* path = "test_vm_trace.json";
  EXPECT_ERROR(kiln_trace_create(NULL), KILN_INVALID_ARGUMENT, "trace_create: out is NULL");
  OK(kiln_trace_create(&t));
  OK(kiln_context_create(m, &c));
  if (!t || !c) return;
  CHECK(kiln_trace_event_count(t) == 0 && kiln_trace_call_ns(t, &calls) == 0 && calls == 0);
  kiln_context_set_trace(c, t);
  CHECK(call_i64(c, m, "step", 0, 0) == 1); /* calls bump, stores the counter */
  CHECK(call_i64(c, m, "triangle", 1, 4) == 10);
  kiln_context_set_trace(c, NULL);
  CHECK(call_i64(c, m, "triangle", 1, 4) == 10); /* not recorded */
  kiln_trace_call_ns(t, &calls);
  CHECK(calls == 2); /* the callers' calls; bump's is nested */
  CHECK(kiln_trace_event_count(t) == 4); /* step, bump, global.store, triangle */
  CHECK(kiln_trace_dropped_count(t) == 0);
  CHECK(kiln_trace_kernel_stats(t, NULL, 0) == 0); /* no kernel ran */
  kiln_context_set_trace(c, t);
  kiln_context_release(c); /* drops the context's reference; ours remains */
  OK(kiln_trace_write_json(t, path));
  CHECK(file_contains(path, "\"name\": \"step\", \"cat\": \"call\""));
  CHECK(file_contains(path, "\"name\": \"bump\", \"cat\": \"call\""));
  CHECK(file_contains(path, "\"name\": \"counter\", \"cat\": \"global.store\""));
  CHECK(file_contains(path, "\"module\": \"vmtest\""));
  remove(path);
  EXPECT_ERROR(kiln_trace_write_json(t, "no/such/dir/trace.json"), KILN_NOT_FOUND,
               "cannot write trace file 'no/such/dir/trace.json'");
  EXPECT_ERROR(kiln_trace_write_json(NULL, path), KILN_INVALID_ARGUMENT, "trace or path is NULL");
  kiln_trace_retain(t);
  kiln_trace_release(t);
  kiln_trace_release(t);
  kiln_trace_release(NULL);
  CHECK(kiln_trace_event_count(NULL) == 0 && kiln_trace_call_ns(NULL, NULL) == 0);
}

static void test_reflection(kiln_module_t* m) {
  kiln_function_t f;
  kiln_value_info_t info;
  CHECK(strcmp(kiln_module_name(m), "vmtest") == 0);
  CHECK(kiln_module_function_count(m) == 5); /* bump is internal */
  OK(kiln_module_function_at(m, 0, &f));
  CHECK(strcmp(kiln_function_name(f), "triangle") == 0);
  CHECK(kiln_function_arg_count(f) == 1 && kiln_function_result_count(f) == 1);
  OK(kiln_function_arg_info(f, 0, &info));
  CHECK(strcmp(info.name, "n") == 0 && info.dtype == KILN_DTYPE_I64 && info.rank == 0);
  CHECK(strcmp(kiln_function_arg_tree(f), "[\"x\"]") == 0);
  CHECK(strcmp(kiln_function_result_tree(f), "\"y\"") == 0);
  EXPECT_ERROR(kiln_function_arg_info(f, 1, &info), KILN_NOT_FOUND,
               "function 'triangle' has 1 arguments, asked for index 1");
  EXPECT_ERROR(kiln_module_function_at(m, 5, &f), KILN_NOT_FOUND, "5 exported functions");
  EXPECT_ERROR(kiln_module_lookup_function(m, "bump", &f), KILN_NOT_FOUND,
               "no exported function 'bump' (it exports: triangle, step, weights, unset, "
               "recurse)");
  {
    const char *key = NULL, *value = NULL;
    CHECK(kiln_module_provenance_count(m) == 0); /* a hand-made module records none */
    CHECK(kiln_module_provenance(m, "producer") == NULL && kiln_module_provenance(NULL, "x") == NULL);
    EXPECT_ERROR(kiln_module_provenance_at(m, 0, &key, &value), KILN_NOT_FOUND,
                 "provenance entry 0: the module has 0");
    EXPECT_ERROR(kiln_module_provenance_at(m, 0, NULL, &value), KILN_INVALID_ARGUMENT,
                 "module, key or value is NULL");
  }
  CHECK(kiln_module_global_count(m) == 2);
  OK(kiln_module_global_info(m, 0, &info));
  CHECK(strcmp(info.name, "w") == 0 && info.rank == 1 && info.shape[0] == 4 &&
        !info.is_mutable);
  OK(kiln_module_global_info(m, 1, &info));
  CHECK(strcmp(info.name, "counter") == 0 && info.is_mutable);
}

static void test_invoke(kiln_module_t* m) {
  kiln_context_t *c = NULL, *c2 = NULL;
  kiln_function_t f;
  kiln_buffer_view_t* out[2] = {NULL, NULL};
  kiln_buffer_view_t* g = NULL;
  kiln_buffer_view_t* bad = NULL;
  int64_t shape4[1] = {4};
  OK(kiln_context_create(m, &c));
  OK(kiln_context_create(m, &c2));
  if (!c || !c2) return;
  CHECK(call_i64(c, m, "triangle", 1, 10) == 55);
  CHECK(call_i64(c, m, "triangle", 1, 0) == 0);
  CHECK(call_i64(c, m, "step", 0, 0) == 1);
  CHECK(call_i64(c, m, "step", 0, 0) == 2);
  CHECK(call_i64(c2, m, "step", 0, 0) == 1); /* contexts do not share globals */
  OK(kiln_context_get_global(c, "counter", &g));
  if (g) CHECK(read_i64(g) == 2);
  kiln_buffer_view_release(g);
  g = scalar_i64(100);
  OK(kiln_context_set_global(c, "counter", g));
  kiln_buffer_view_release(g);
  CHECK(call_i64(c, m, "step", 0, 0) == 101);

  OK(kiln_module_lookup_function(m, "weights", &f));
  OK(kiln_context_invoke(c, f, NULL, 0, out, 2));
  if (out[0] && out[1]) {
    const float* w = kiln_buffer_view_data(out[0]);
    CHECK(w[0] == 1.5f && w[3] == 4.0f);
    CHECK(((uintptr_t)w % 64) == 0);
    CHECK(read_i64(out[1]) == 42);
  }
  kiln_buffer_view_release(out[0]);
  kiln_buffer_view_release(out[1]);

  /* Argument and result checks name the function, argument and types. */
  OK(kiln_buffer_view_create(KILN_DTYPE_F32, 1, shape4, NULL, 0, &bad));
  OK(kiln_module_lookup_function(m, "triangle", &f));
  EXPECT_ERROR(kiln_context_invoke(c, f, &bad, 1, out, 1), KILN_INVALID_ARGUMENT,
               "triangle: argument 0 'n' expects i64, got 4xf32");
  EXPECT_ERROR(kiln_context_invoke(c, f, &bad, 0, out, 1), KILN_INVALID_ARGUMENT,
               "triangle: expects 1 arguments, got 0");
  EXPECT_ERROR(kiln_context_invoke(c, f, &bad, 1, out, 0), KILN_INVALID_ARGUMENT,
               "triangle: returns 1 results, result capacity is 0");
  EXPECT_ERROR(kiln_context_set_global(c, "counter", bad), KILN_INVALID_ARGUMENT,
               "set_global 'counter': expects i64, got 4xf32");
  EXPECT_ERROR(kiln_context_get_global(c, "nope", &g), KILN_NOT_FOUND,
               "module 'vmtest' has no global 'nope'");
  kiln_buffer_view_release(bad);

  OK(kiln_module_lookup_function(m, "unset", &f));
  EXPECT_ERROR(kiln_context_invoke(c, f, NULL, 0, out, 1), KILN_FAILED_PRECONDITION,
               "register r3 read before assignment in function 'unset'");
  OK(kiln_module_lookup_function(m, "recurse", &f));
  EXPECT_ERROR(kiln_context_invoke(c, f, NULL, 0, out, 1), KILN_FAILED_PRECONDITION,
               "call depth limit (64) exceeded calling 'recurse'");
  kiln_context_release(c);
  kiln_context_release(c2);
}

/* ---- buffer.row and buffer.set_row (module vmrows) ---------------------------- */

/* An f32 buffer holding start, start + 1, ... */
static kiln_buffer_view_t* f32_iota(size_t rank, const int64_t* shape, float start) {
  kiln_buffer_view_t* view = NULL;
  size_t i, n;
  float* data;
  OK(kiln_buffer_view_create(KILN_DTYPE_F32, rank, shape, NULL, 0, &view));
  if (!view) return NULL;
  n = kiln_buffer_view_element_count(view);
  data = kiln_buffer_view_mutable_data(view);
  for (i = 0; i < n; ++i) data[i] = start + (float)i;
  return view;
}

static kiln_status_t call(kiln_context_t* c, kiln_module_t* m, const char* name,
                          kiln_buffer_view_t** args, size_t n, kiln_buffer_view_t** out) {
  kiln_function_t f;
  kiln_status_t s = kiln_module_lookup_function(m, name, &f);
  return s ? s : kiln_context_invoke(c, f, args, n, out, 1);
}

/* Calls row16/row4 on (x, i); returns the row (NULL on error, status in *err). */
static kiln_buffer_view_t* row_of(kiln_context_t* c, kiln_module_t* m, const char* name,
                                  kiln_buffer_view_t* x, int64_t i, kiln_status_t* err) {
  kiln_buffer_view_t* args[2] = {x, scalar_i64(i)};
  kiln_buffer_view_t* out = NULL;
  *err = call(c, m, name, args, 2, &out);
  kiln_buffer_view_release(args[1]);
  return out;
}

/* The row's elements are x's row i (row_len floats). */
static int same_row(const kiln_buffer_view_t* row, const kiln_buffer_view_t* x, int64_t i,
                    size_t row_len) {
  return kiln_buffer_view_element_count(row) == row_len &&
         memcmp(kiln_buffer_view_data(row),
                (const float*)kiln_buffer_view_data(x) + (size_t)i * row_len,
                row_len * sizeof(float)) == 0;
}

static void test_rows(kiln_instance_t* inst) {
  kiln_module_t* m = NULL;
  kiln_context_t* c = NULL;
  kiln_buffer_view_t *x16, *x4, *r, *out = NULL;
  kiln_status_t s;
  const int64_t s16[2] = {6, 16}, s4[2] = {5, 4}, s3[1] = {3}, s4v[1] = {4};
  int64_t i;
  OK(kiln_module_load_memory(inst, kiln_vm_test_rows, sizeof kiln_vm_test_rows, &m));
  if (m) OK(kiln_context_create(m, &c));
  if (!c) {
    kiln_module_release(m);
    return;
  }
  x16 = f32_iota(2, s16, 0.0f);
  x4 = f32_iota(2, s4, 100.0f);

  /* 64-byte rows: every row is a view into x's memory. */
  for (i = 0; i < 6; ++i) {
    r = row_of(c, m, "row16", x16, i, &s);
    OK(s);
    if (!r) continue;
    CHECK(kiln_buffer_view_rank(r) == 1 && kiln_buffer_view_shape(r)[0] == 16);
    CHECK(kiln_buffer_view_data(r) == (const char*)kiln_buffer_view_data(x16) + 64 * i);
    CHECK(same_row(r, x16, i, 16));
    CHECK(kiln_buffer_view_mutable_data(r) == NULL); /* a view is read-only */
    kiln_buffer_view_release(r);
  }
  /* 16-byte rows: views where the row starts on a 64-byte boundary, else copies;
   * every row is 64-byte aligned either way. */
  for (i = 0; i < 5; ++i) {
    r = row_of(c, m, "row4", x4, i, &s);
    OK(s);
    if (!r) continue;
    CHECK(((uintptr_t)kiln_buffer_view_data(r) % 64) == 0);
    CHECK((kiln_buffer_view_data(r) ==
           (const char*)kiln_buffer_view_data(x4) + 16 * i) == (i % 4 == 0));
    CHECK(same_row(r, x4, i, 4));
    kiln_buffer_view_release(r);
  }
  /* A row keeps its buffer alive after everyone else lets go of it. */
  r = row_of(c, m, "row16", x16, 5, &s);
  OK(s);
  kiln_buffer_view_release(x16);
  if (r) CHECK(((const float*)kiln_buffer_view_data(r))[15] == 95.0f);
  kiln_buffer_view_release(r);

  EXPECT_ERROR((row_of(c, m, "row4", x4, 5, &s), s), KILN_FAILED_PRECONDITION,
               "in function 'row4' at word 3 (buffer.row): buffer.row: index i0 = 5 is out "
               "of range for src r0 of type 5x4xf32: expected 0 <= index < 5");
  EXPECT_ERROR((row_of(c, m, "row4", x4, -1, &s), s), KILN_FAILED_PRECONDITION,
               "buffer.row: index i0 = -1 is out of range");
  EXPECT_ERROR((row_of(c, m, "row4", x4, INT64_MIN, &s), s), KILN_FAILED_PRECONDITION,
               "index i0 = -9223372036854775808 is out of range");

  /* A loop over rows: ys[4 - i] = xs[i]. */
  OK(call(c, m, "reverse", &x4, 1, &out));
  if (out) {
    for (i = 0; i < 5; ++i)
      CHECK(memcmp((const float*)kiln_buffer_view_data(out) + 4 * (4 - i),
                   (const float*)kiln_buffer_view_data(x4) + 4 * i, 16) == 0);
  }
  kiln_buffer_view_release(out);
  out = NULL;

  {
    kiln_buffer_view_t* v = f32_iota(1, s4v, 7.0f);
    kiln_buffer_view_t* args[2] = {scalar_i64(1), v};
    OK(call(c, m, "put", args, 2, &out));
    if (out) {
      const float* d = kiln_buffer_view_data(out);
      CHECK(d[0] == 7.0f && d[3] == 10.0f && d[4] == 7.0f && d[7] == 10.0f);
    }
    kiln_buffer_view_release(out);
    out = NULL;
    kiln_buffer_view_release(args[0]);
    args[0] = scalar_i64(2);
    EXPECT_ERROR(call(c, m, "put", args, 2, &out), KILN_FAILED_PRECONDITION,
                 "in function 'put' at word 22 (buffer.set_row): buffer.set_row: index i0 "
                 "= 2 is out of range for dst r2 of type 2x4xf32: expected 0 <= index < 2");
    kiln_buffer_view_release(args[0]);
    args[0] = x4;
    EXPECT_ERROR(call(c, m, "put_arg", args, 2, &out), KILN_FAILED_PRECONDITION,
                 "buffer.set_row: dst r0 holds a read-only buffer (a constant, a global's "
                 "value, an argument or a row view), expected one this invocation allocated");
    EXPECT_ERROR(call(c, m, "put_frozen", &v, 1, &out), KILN_FAILED_PRECONDITION,
                 "buffer.set_row: dst r1 holds a read-only buffer (frozen: it was stored "
                 "into a global or buffer.row took a row of it)");
    kiln_buffer_view_release(v);
  }
  {
    kiln_buffer_view_t* v = f32_iota(1, s3, 0.0f);
    kiln_buffer_view_t* w = NULL;
    EXPECT_ERROR(call(c, m, "put_wide", &v, 1, &out), KILN_FAILED_PRECONDITION,
                 "buffer.set_row: src r0 is 3xf32, expected 4xf32 (a row of dst r1, 2x4xf32)");
    OK(kiln_buffer_view_create(KILN_DTYPE_F64, 1, s4v, NULL, 0, &w));
    EXPECT_ERROR(call(c, m, "put_f64", &w, 1, &out), KILN_FAILED_PRECONDITION,
                 "buffer.set_row: src r0 is 4xf64, expected 4xf32");
    kiln_buffer_view_release(v);
    kiln_buffer_view_release(w);
  }
  {
    kiln_buffer_view_t* k = scalar_i64(3);
    EXPECT_ERROR(call(c, m, "row_scalar", &k, 1, &out), KILN_FAILED_PRECONDITION,
                 "in function 'row_scalar' at word 4 (buffer.row): buffer.row: src r0 is a "
                 "0-d buffer (i64), expected rank >= 1");
    kiln_buffer_view_release(k);
  }
  {
    /* buffer.view: 2x2xf32 as 2xc64 (the same bytes) and back as 4xf32. */
    const int64_t s22[2] = {2, 2};
    kiln_buffer_view_t* p = f32_iota(2, s22, 1.0f);
    kiln_buffer_view_t* outs[2] = {NULL, NULL};
    kiln_function_t f;
    OK(kiln_module_lookup_function(m, "join", &f));
    OK(kiln_context_invoke(c, f, &p, 1, outs, 2));
    if (outs[0] && outs[1]) {
      const float* z = kiln_buffer_view_data(outs[0]);
      CHECK(kiln_buffer_view_dtype(outs[0]) == KILN_DTYPE_C64 && kiln_buffer_view_rank(outs[0]) == 1);
      CHECK(z[0] == 1.0f && z[1] == 2.0f && z[2] == 3.0f && z[3] == 4.0f);
      CHECK(kiln_buffer_view_dtype(outs[1]) == KILN_DTYPE_F32 &&
            kiln_buffer_view_shape(outs[1])[0] == 4);
    }
    kiln_buffer_view_release(outs[0]);
    kiln_buffer_view_release(outs[1]);
    kiln_buffer_view_release(p);
    const int64_t s3v[1] = {3};
    p = f32_iota(1, s3v, 0.0f);
    EXPECT_ERROR(call(c, m, "join_bad", &p, 1, &out), KILN_FAILED_PRECONDITION,
                 "in function 'join_bad' at word 0 (buffer.view): buffer.view: src r0 is 3xf32 "
                 "(12 bytes), which cannot be viewed as 2xc64 (16 bytes)");
    kiln_buffer_view_release(p);
  }
  CHECK(out == NULL);
  kiln_buffer_view_release(x4);
  kiln_context_release(c);
  kiln_module_release(m);
}

/* Caller memory wrapped at element (not 64-byte) alignment: a module whose
 * kernels need only element alignment (format 2.1) reads it in place and
 * shares every row; an older module (vmrows: no element_aligned_bindings)
 * gets a 64-byte aligned copy of the argument for the call. */
static void test_element_aligned_arguments(kiln_instance_t* inst) {
  _Alignas(64) static float memory[1 + 6 * 16];
  const int64_t s16[2] = {6, 16}, s4[2] = {5, 4};
  kiln_module_t *old = NULL, *aligned = NULL;
  kiln_context_t *c_old = NULL, *c_aligned = NULL;
  kiln_buffer_view_t *x16 = NULL, *x4 = NULL, *r;
  kiln_status_t s;
  const float* base = memory + 1; /* 4 bytes past a 64-byte boundary */
  int64_t i;
  for (i = 0; i < 1 + 6 * 16; ++i) memory[i] = (float)i - 1.0f;
  OK(kiln_module_load_memory(inst, kiln_vm_test_rows, sizeof kiln_vm_test_rows, &old));
  OK(kiln_module_load_memory(inst, kiln_vm_test_rows_element_aligned,
                             sizeof kiln_vm_test_rows_element_aligned, &aligned));
  if (old) OK(kiln_context_create(old, &c_old));
  if (aligned) OK(kiln_context_create(aligned, &c_aligned));
  OK(kiln_buffer_view_wrap(KILN_DTYPE_F32, 2, s16, (void*)base, 6 * 16 * sizeof(float), NULL,
                           NULL, &x16));
  OK(kiln_buffer_view_wrap(KILN_DTYPE_F32, 2, s4, (void*)base, 5 * 4 * sizeof(float), NULL,
                           NULL, &x4));
  if (!c_old || !c_aligned || !x16 || !x4) goto done;
  for (i = 0; i < 6; ++i) {
    r = row_of(c_aligned, aligned, "row16", x16, i, &s);
    OK(s);
    if (r) {
      CHECK(kiln_buffer_view_data(r) == base + 16 * i); /* the caller's memory itself */
      CHECK(same_row(r, x16, i, 16) && ((const float*)kiln_buffer_view_data(r))[0] == 16.0f * i);
    }
    kiln_buffer_view_release(r);
    r = row_of(c_old, old, "row16", x16, i, &s);
    OK(s);
    if (r) {
      CHECK(((uintptr_t)kiln_buffer_view_data(r) % 64) == 0); /* a row of the aligned copy */
      CHECK(same_row(r, x16, i, 16));
    }
    kiln_buffer_view_release(r);
  }
  for (i = 0; i < 5; ++i) { /* 16-byte rows: views at every index */
    r = row_of(c_aligned, aligned, "row4", x4, i, &s);
    OK(s);
    if (r) CHECK(kiln_buffer_view_data(r) == base + 4 * i && same_row(r, x4, i, 4));
    kiln_buffer_view_release(r);
  }
done:
  kiln_buffer_view_release(x16);
  kiln_buffer_view_release(x4);
  kiln_context_release(c_old);
  kiln_context_release(c_aligned);
  kiln_module_release(old);
  kiln_module_release(aligned);
}

/* kiln_context_invoke_host: arguments in host memory of the declared types,
 * results copied into destinations or returned as views that never share the
 * caller's memory; every check names the function and the value. */
static kiln_function_t lookup(kiln_module_t* m, const char* name) {
  kiln_function_t f = {NULL, 0};
  OK(kiln_module_lookup_function(m, name, &f));
  return f;
}

static void test_invoke_host(kiln_instance_t* inst) {
  _Alignas(64) static float x[1 + 6 * 16];
  kiln_module_t *good = NULL, *rows = NULL, *old = NULL;
  kiln_context_t *c = NULL, *cr = NULL, *co = NULL;
  kiln_function_t triangle, weights, unset, row16, reverse;
  kiln_buffer_view_t *views[2] = {NULL, NULL}, *xv = NULL;
  int64_t n = 10, sum = -1, i2 = 2;
  float w[4] = {0}, ys[5 * 4], *xs4;
  _Alignas(8) char bytes[5 * 4 * sizeof(float) + 1];
  const int64_t s16[2] = {6, 16};
  kiln_host_buffer_t a[2], r[2];
  size_t i;
  for (i = 0; i < 1 + 6 * 16; ++i) x[i] = (float)i;
  OK(kiln_module_load_memory(inst, kiln_vm_test_good, sizeof kiln_vm_test_good, &good));
  OK(kiln_module_load_memory(inst, kiln_vm_test_rows_element_aligned,
                             sizeof kiln_vm_test_rows_element_aligned, &rows));
  OK(kiln_module_load_memory(inst, kiln_vm_test_rows, sizeof kiln_vm_test_rows, &old));
  if (good) OK(kiln_context_create(good, &c));
  if (rows) OK(kiln_context_create(rows, &cr));
  if (old) OK(kiln_context_create(old, &co));
  if (!c || !cr || !co) goto done;
  triangle = lookup(good, "triangle");
  weights = lookup(good, "weights");
  unset = lookup(good, "unset");
  row16 = lookup(rows, "row16");
  reverse = lookup(rows, "reverse");

  /* A result into its destination, then as a view. */
  a[0] = (kiln_host_buffer_t){&n, sizeof n, NULL};
  r[0] = (kiln_host_buffer_t){&sum, sizeof sum, NULL};
  views[0] = (kiln_buffer_view_t*)&n; /* overwritten with NULL */
  OK(kiln_context_invoke_host(c, triangle, a, 1, r, views, 1));
  CHECK(sum == 55 && views[0] == NULL);
  n = 4;
  OK(kiln_context_invoke_host(c, triangle, a, 1, NULL, views, 1));
  CHECK(views[0] && *(const int64_t*)kiln_buffer_view_data(views[0]) == 10);
  kiln_buffer_view_release(views[0]);
  views[0] = NULL;
  /* Two results: the first copied out, the second a view; no arguments. */
  r[0] = (kiln_host_buffer_t){w, sizeof w, NULL};
  r[1] = (kiln_host_buffer_t){NULL, 0, NULL};
  OK(kiln_context_invoke_host(c, weights, NULL, 0, r, views, 2));
  CHECK(w[0] == 1.5f && w[3] == 4.0f && views[0] == NULL);
  CHECK(views[1] && *(const int64_t*)kiln_buffer_view_data(views[1]) == 42);
  kiln_buffer_view_release(views[1]);
  views[1] = NULL;

  /* A row of caller memory read in place comes back as a copy of its own;
   * a row of an owner's memory shares it. */
  a[0] = (kiln_host_buffer_t){x, 6 * 16 * sizeof(float), NULL};
  a[1] = (kiln_host_buffer_t){&i2, sizeof i2, NULL};
  OK(kiln_context_invoke_host(cr, row16, a, 2, NULL, views, 1));
  if (views[0]) {
    const float* row = kiln_buffer_view_data(views[0]);
    CHECK((const char*)row < (const char*)x || (const char*)row >= (const char*)(x + 6 * 16));
    CHECK(row[0] == 32.0f && row[15] == 47.0f);
  }
  kiln_buffer_view_release(views[0]);
  views[0] = NULL;
  OK(kiln_buffer_view_create(KILN_DTYPE_F32, 2, s16, x, 6 * 16 * sizeof(float), &xv));
  if (xv) {
    a[0] = (kiln_host_buffer_t){kiln_buffer_view_mutable_data(xv), 6 * 16 * sizeof(float), xv};
    OK(kiln_context_invoke_host(cr, row16, a, 2, NULL, views, 1));
    if (views[0])
      CHECK(kiln_buffer_view_data(views[0]) == (const float*)kiln_buffer_view_data(xv) + 32);
    kiln_buffer_view_release(xv); /* the row keeps the owner alive */
    if (views[0]) CHECK(((const float*)kiln_buffer_view_data(views[0]))[15] == 47.0f);
    kiln_buffer_view_release(views[0]);
    views[0] = NULL;
  }
  /* Element-aligned memory into a module that needs 64-byte alignment, and
   * memory not aligned to its elements (copied): the same values. */
  a[0] = (kiln_host_buffer_t){x + 1, 6 * 16 * sizeof(float), NULL};
  OK(kiln_context_invoke_host(co, lookup(old, "row16"), a, 2, NULL, views, 1));
  if (views[0]) CHECK(((const float*)kiln_buffer_view_data(views[0]))[0] == 33.0f);
  kiln_buffer_view_release(views[0]);
  views[0] = NULL;
  xs4 = (float*)(bytes + 1);
  memcpy(xs4, x, 5 * 4 * sizeof(float));
  a[0] = (kiln_host_buffer_t){xs4, 5 * 4 * sizeof(float), NULL};
  r[0] = (kiln_host_buffer_t){ys, sizeof ys, NULL};
  OK(kiln_context_invoke_host(cr, reverse, a, 1, r, views, 1));
  CHECK(ys[0] == 16.0f && ys[19] == 3.0f);

  /* Errors. */
  a[0] = (kiln_host_buffer_t){&n, sizeof n, NULL};
  r[0] = (kiln_host_buffer_t){&sum, sizeof sum, NULL};
  EXPECT_ERROR(kiln_context_invoke_host(NULL, triangle, a, 1, r, views, 1),
               KILN_INVALID_ARGUMENT, "invoke: context is NULL");
  EXPECT_ERROR(kiln_context_invoke_host(cr, triangle, a, 1, r, views, 1), KILN_INVALID_ARGUMENT,
               "invoke: the function does not belong to this context's module "
               "'vmrows_element_aligned'");
  EXPECT_ERROR(kiln_context_invoke_host(c, triangle, a, 2, r, views, 1), KILN_INVALID_ARGUMENT,
               "triangle: expects 1 arguments, got 2");
  EXPECT_ERROR(kiln_context_invoke_host(c, triangle, a, 1, r, views, 2), KILN_INVALID_ARGUMENT,
               "triangle: returns 1 results, result count is 2");
  EXPECT_ERROR(kiln_context_invoke_host(c, triangle, a, 1, r, NULL, 1), KILN_INVALID_ARGUMENT,
               "triangle: returns 1 results, result count is 0");
  EXPECT_ERROR(kiln_context_invoke_host(c, triangle, NULL, 1, r, views, 1),
               KILN_INVALID_ARGUMENT, "triangle: args is NULL");
  a[0].byte_size = 4;
  EXPECT_ERROR(kiln_context_invoke_host(c, triangle, a, 1, r, views, 1), KILN_INVALID_ARGUMENT,
               "triangle: argument 0 'n' expects i64 (8 bytes), got 4 bytes");
  a[0] = (kiln_host_buffer_t){NULL, sizeof n, NULL};
  EXPECT_ERROR(kiln_context_invoke_host(c, triangle, a, 1, r, views, 1), KILN_INVALID_ARGUMENT,
               "triangle: argument 0 'n' (i64): data is NULL");
  a[0] = (kiln_host_buffer_t){&n, sizeof n, NULL};
  r[0].byte_size = 16;
  EXPECT_ERROR(kiln_context_invoke_host(c, triangle, a, 1, r, views, 1), KILN_INVALID_ARGUMENT,
               "triangle: result 0 'sum' is i64 (8 bytes), its destination holds 16 bytes");
  views[0] = (kiln_buffer_view_t*)&n;
  EXPECT_ERROR(kiln_context_invoke_host(c, unset, NULL, 0, NULL, views, 1),
               KILN_FAILED_PRECONDITION, "register r3 read before assignment in function 'unset'");
  CHECK(views[0] == NULL);
  {
    kiln_call_limits_t limits = {0, 20};
    n = 1000;
    OK(kiln_context_set_call_limits(c, &limits));
    EXPECT_ERROR(kiln_context_invoke_host(c, triangle, a, 1, NULL, views, 1),
                 KILN_DEADLINE_EXCEEDED, "");
    CHECK(views[0] == NULL);
    OK(kiln_context_set_call_limits(c, NULL));
  }
done:
  kiln_context_release(c);
  kiln_context_release(cr);
  kiln_context_release(co);
  kiln_module_release(good);
  kiln_module_release(rows);
  kiln_module_release(old);
}

typedef struct worker {
  kiln_module_t* module;
  int64_t result;
} worker_t;

static void* run_worker(void* arg) {
  worker_t* w = arg;
  kiln_context_t* c = NULL;
  int i;
  OK(kiln_context_create(w->module, &c));
  if (!c) return NULL;
  for (i = 0; i < 200; ++i) w->result = call_i64(c, w->module, "step", 0, 0);
  kiln_context_release(c);
  return NULL;
}

static void test_concurrent_contexts(kiln_module_t* m) {
  pthread_t threads[4];
  worker_t workers[4];
  int i;
  for (i = 0; i < 4; ++i) {
    workers[i].module = m;
    workers[i].result = 0;
    CHECK(pthread_create(&threads[i], NULL, run_worker, &workers[i]) == 0);
  }
  for (i = 0; i < 4; ++i) {
    pthread_join(threads[i], NULL);
    CHECK(workers[i].result == 200);
  }
}

static void test_bad_modules(kiln_instance_t* inst) {
  size_t i;
  kiln_module_t* m = NULL;
  for (i = 0; i < sizeof kiln_vm_bad_modules / sizeof kiln_vm_bad_modules[0]; ++i) {
    const kiln_vm_bad_module_t* b = &kiln_vm_bad_modules[i];
    kiln_status_code_t code =
        strncmp(b->name, "version", 7) == 0 ? KILN_UNIMPLEMENTED : KILN_DATA_LOSS;
    EXPECT_ERROR(kiln_module_load_memory(inst, b->data, b->size, &m), code, b->expect);
    CHECK(m == NULL);
  }
  EXPECT_ERROR(kiln_module_load_memory(inst, "", 0, &m), KILN_DATA_LOSS, "too short");
  EXPECT_ERROR(kiln_module_load_file(inst, "/nonexistent/x.vmfb", &m), KILN_NOT_FOUND,
               "cannot open module '/nonexistent/x.vmfb'");
}

/* Replaces the last 4 bytes of a sealed module with the checksum of the rest. */
static void reseal(unsigned char* data, size_t size) {
  uint32_t crc = kiln_crc32(0, data, size - 4);
  data[size - 4] = (unsigned char)crc;
  data[size - 3] = (unsigned char)(crc >> 8);
  data[size - 2] = (unsigned char)(crc >> 16);
  data[size - 1] = (unsigned char)(crc >> 24);
}

/* Every truncation and every single-byte corruption fails to load with a
 * DATA_LOSS naming the checksum (or its missing trailer); the same
 * corruptions with the checksum recomputed (as if the damage had happened
 * before it was computed) reach the deeper checks, and load or fail cleanly. */
static void test_corruption(kiln_instance_t* inst, const unsigned char* data,
                            size_t data_size) {
  static const unsigned char masks[] = {0x01, 0x80, 0xff};
  unsigned char* copy = malloc(data_size);
  size_t n, k, loaded = 0;
  int sealed;
  CHECK(copy != NULL);
  if (!copy) return;
  for (sealed = 0; sealed < 2; ++sealed) {
    for (n = 0; n <= data_size * 4; ++n) {
      kiln_module_t* m = NULL;
      kiln_context_t* c = NULL;
      kiln_status_t s;
      size_t size = data_size;
      memcpy(copy, data, data_size);
      if (n < data_size) {
        if (sealed) continue;
        size = n;
      } else {
        k = n - data_size;
        if (k / 3 >= data_size) break;
        if (sealed && k / 3 >= data_size - KILN_TRAILER_SIZE) continue;
        copy[k / 3] ^= masks[k % 3];
        if (sealed) reseal(copy, data_size);
      }
      s = kiln_module_load_memory(inst, copy, size, &m);
      if (s) {
        CHECK(kiln_status_message(s)[0] != 0);
        if (!sealed) {
          CHECK(kiln_status_code(s) == KILN_DATA_LOSS);
          if (n >= data_size && !strstr(kiln_status_message(s), "checksum")) {
            fprintf(stderr, "flip %zu: %s\n", k / 3, kiln_status_message(s));
            failures++;
          }
        }
        kiln_status_free(s);
        continue;
      }
      if (!sealed) {
        fprintf(stderr, "%s %zu of a sealed module loaded\n",
                n < data_size ? "truncation to" : "flip at", n < data_size ? n : k / 3);
        failures++;
      }
      loaded++;
      s = kiln_context_create(m, &c);
      kiln_status_free(s);
      kiln_context_release(c);
      kiln_module_release(m);
    }
  }
  CHECK(loaded > 0); /* some resealed flips (in data, names) still load */
  free(copy);
}

static void test_load_file(kiln_instance_t* inst) {
  char path[] = "/tmp/kiln_test_vm_XXXXXX";
  int fd = mkstemp(path);
  kiln_module_t* m = NULL;
  kiln_context_t* c = NULL;
  CHECK(fd >= 0);
  if (fd < 0) return;
  CHECK(write(fd, kiln_vm_test_good, sizeof kiln_vm_test_good) ==
        (ssize_t)sizeof kiln_vm_test_good);
  close(fd);
  OK(kiln_module_load_file(inst, path, &m));
  unlink(path);
  if (!m) return;
  OK(kiln_context_create(m, &c));
  kiln_module_release(m); /* the context keeps the module alive */
  if (c) CHECK(call_i64(c, m, "triangle", 1, 4) == 10);
  kiln_context_release(c);
}

int main(void) {
  kiln_instance_options_t opts;
  kiln_instance_t* inst = NULL;
  kiln_module_t* m = NULL;
  kiln_instance_options_initialize(&opts);
  opts.worker_count = 1;
  OK(kiln_instance_create(&opts, &inst));
  if (!inst) return 1;
  OK(kiln_module_load_memory(inst, kiln_vm_test_good, sizeof kiln_vm_test_good, &m));
  if (m) {
    test_reflection(m);
    test_invoke(m);
    test_concurrent_contexts(m);
    test_trace(m);
    kiln_module_release(m);
  }
  test_rows(inst);
  test_element_aligned_arguments(inst);
  test_invoke_host(inst);
  test_bad_modules(inst);
  test_corruption(inst, kiln_vm_test_good, sizeof kiln_vm_test_good);
  test_corruption(inst, kiln_vm_test_rows, sizeof kiln_vm_test_rows);
  test_load_file(inst);
  kiln_instance_release(inst);
  if (failures) fprintf(stderr, "%d failures\n", failures);
  else printf("test_vm: all passed\n");
  return failures != 0;
}
