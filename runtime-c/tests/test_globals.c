/* Globals for applications: kiln_context_get_global / kiln_context_set_global
 * by name on the `vmtest` module of vm_test_modules.h (globals `w`: 4xf32,
 * immutable, [1.5 2 3 4]; `counter`: i64, mutable, 0; `step()` increments
 * the counter and returns it; `weights()` returns w and 42).
 *
 * Covers: reading initial values, writing mutable and immutable globals,
 * that a set copies its value and a get is a snapshot, contexts that do not
 * share state, a checkpoint copied by name into a fresh context, and every
 * error (unknown name, wrong dtype, wrong shape, wrong rank, NULL arguments)
 * leaving the global unchanged. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kiln/runtime.h"
#include "test_util.h"
#include "vm_test_modules.h"

static kiln_buffer_view_t* make_view(kiln_dtype_t dtype, size_t rank, const int64_t* shape,
                                     const void* data, size_t size) {
  kiln_buffer_view_t* view = NULL;
  CHECK_OK(kiln_buffer_view_create(dtype, rank, shape, data, size, &view));
  return view;
}

static int64_t get_i64(kiln_context_t* c, const char* name) {
  kiln_buffer_view_t* v = NULL;
  int64_t out = -999;
  CHECK_OK(kiln_context_get_global(c, name, &v));
  if (v) {
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_I64 && kiln_buffer_view_rank(v) == 0);
    memcpy(&out, kiln_buffer_view_data(v), sizeof out);
  }
  kiln_buffer_view_release(v);
  return out;
}

static void set_i64(kiln_context_t* c, const char* name, int64_t value) {
  kiln_buffer_view_t* v = make_view(KILN_DTYPE_I64, 0, NULL, &value, sizeof value);
  CHECK_OK(kiln_context_set_global(c, name, v));
  kiln_buffer_view_release(v);
}

/* Copies the 4 floats of global `w` into out. */
static void get_w(kiln_context_t* c, float out[4]) {
  kiln_buffer_view_t* v = NULL;
  memset(out, 0, 4 * sizeof(float));
  CHECK_OK(kiln_context_get_global(c, "w", &v));
  if (v) {
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_F32 && kiln_buffer_view_rank(v) == 1 &&
          kiln_buffer_view_shape(v)[0] == 4);
    memcpy(out, kiln_buffer_view_data(v), 4 * sizeof(float));
    CHECK(!kiln_buffer_view_is_exclusive(v)); /* the context holds the global too */
  }
  kiln_buffer_view_release(v);
}

static int64_t step(kiln_context_t* c, kiln_module_t* m) {
  kiln_function_t f;
  kiln_buffer_view_t* out = NULL;
  int64_t v = -999;
  CHECK_OK(kiln_module_lookup_function(m, "step", &f));
  CHECK_OK(kiln_context_invoke(c, f, NULL, 0, &out, 1));
  if (out) memcpy(&v, kiln_buffer_view_data(out), sizeof v);
  kiln_buffer_view_release(out);
  return v;
}

static void test_read_and_write(kiln_module_t* m) {
  kiln_context_t *c = NULL, *other = NULL;
  CHECK_OK(kiln_context_create(m, &c));
  CHECK_OK(kiln_context_create(m, &other));
  if (!c || !other) return;
  float w[4];

  /* Initial values. */
  CHECK(get_i64(c, "counter") == 0);
  get_w(c, w);
  CHECK(w[0] == 1.5f && w[1] == 2.0f && w[2] == 3.0f && w[3] == 4.0f);

  /* A mutable global: the program sees the value set, and we see its stores. */
  set_i64(c, "counter", 41);
  CHECK(step(c, m) == 42);
  CHECK(get_i64(c, "counter") == 42);
  CHECK(get_i64(other, "counter") == 0); /* contexts do not share globals */

  /* A get is a snapshot: later stores replace the global, not the view. */
  kiln_buffer_view_t* before = NULL;
  CHECK_OK(kiln_context_get_global(c, "counter", &before));
  CHECK(step(c, m) == 43);
  if (before) {
    int64_t v;
    memcpy(&v, kiln_buffer_view_data(before), sizeof v);
    CHECK(v == 42);
  }
  kiln_buffer_view_release(before);

  /* An immutable global can be set too (restoring a checkpoint), and the
   * value is copied: changing the source afterwards changes nothing. */
  const float nw[4] = {-1.0f, 0.5f, 8.0f, 16.0f};
  const int64_t shape4[1] = {4};
  kiln_buffer_view_t* src = make_view(KILN_DTYPE_F32, 1, shape4, nw, sizeof nw);
  CHECK_OK(kiln_context_set_global(c, "w", src));
  if (src) ((float*)kiln_buffer_view_mutable_data(src))[0] = 99.0f;
  kiln_buffer_view_release(src);
  get_w(c, w);
  CHECK(w[0] == -1.0f && w[1] == 0.5f && w[2] == 8.0f && w[3] == 16.0f);
  kiln_function_t weights;
  kiln_buffer_view_t* out[2] = {NULL, NULL};
  CHECK_OK(kiln_module_lookup_function(m, "weights", &weights));
  CHECK_OK(kiln_context_invoke(c, weights, NULL, 0, out, 2));
  if (out[0]) CHECK(memcmp(kiln_buffer_view_data(out[0]), nw, sizeof nw) == 0);
  /* a result that is a global's value is not the caller's alone (the set value is an owned copy) */
  if (out[0]) CHECK(kiln_buffer_view_mutable_data(out[0]) && !kiln_buffer_view_is_exclusive(out[0]));
  kiln_buffer_view_release(out[0]);
  kiln_buffer_view_release(out[1]);
  get_w(other, w);
  CHECK(w[0] == 1.5f); /* the other context keeps the module's initial value */

  kiln_context_release(other);
  kiln_context_release(c);
}

/* Every global of one context copied by name into a fresh one: the copy
 * continues exactly where the original is. */
static void test_checkpoint_by_name(kiln_module_t* m) {
  kiln_context_t *a = NULL, *b = NULL;
  CHECK_OK(kiln_context_create(m, &a));
  if (!a) return;
  for (int i = 0; i < 5; ++i) step(a, m);
  CHECK_OK(kiln_context_create(m, &b));
  if (!b) {
    kiln_context_release(a);
    return;
  }
  for (size_t i = 0; i < kiln_module_global_count(m); ++i) {
    kiln_value_info_t info;
    kiln_buffer_view_t* v = NULL;
    CHECK_OK(kiln_module_global_info(m, i, &info));
    CHECK_OK(kiln_context_get_global(a, info.name, &v));
    if (v) {
      CHECK(kiln_buffer_view_dtype(v) == info.dtype && kiln_buffer_view_rank(v) == info.rank);
      CHECK_OK(kiln_context_set_global(b, info.name, v));
    }
    kiln_buffer_view_release(v);
  }
  CHECK(step(b, m) == 6);
  CHECK(step(a, m) == 6);
  kiln_context_release(b);
  kiln_context_release(a);
}

static void test_errors(kiln_module_t* m) {
  kiln_context_t* c = NULL;
  CHECK_OK(kiln_context_create(m, &c));
  if (!c) return;
  set_i64(c, "counter", 7);
  const float f4[4] = {9, 9, 9, 9};
  const double d4[4] = {9, 9, 9, 9};
  const float f5[5] = {9, 9, 9, 9, 9};
  const int64_t shape4[1] = {4}, shape5[1] = {5}, shape22[2] = {2, 2};
  const int32_t i32 = 5;
  kiln_buffer_view_t* wrong_dtype = make_view(KILN_DTYPE_F64, 1, shape4, d4, sizeof d4);
  kiln_buffer_view_t* wrong_shape = make_view(KILN_DTYPE_F32, 1, shape5, f5, sizeof f5);
  kiln_buffer_view_t* wrong_rank = make_view(KILN_DTYPE_F32, 2, shape22, f4, sizeof f4);
  kiln_buffer_view_t* counter_i32 = make_view(KILN_DTYPE_I32, 0, NULL, &i32, sizeof i32);
  kiln_buffer_view_t* counter_vec = make_view(KILN_DTYPE_F32, 1, shape4, f4, sizeof f4);
  kiln_buffer_view_t* good_w = make_view(KILN_DTYPE_F32, 1, shape4, f4, sizeof f4);
  kiln_buffer_view_t* v = NULL;

  /* Unknown names, for both directions; get leaves *out NULL. */
  v = good_w; /* a non-NULL pointer that get_global must clear */
  CHECK_ERROR(kiln_context_get_global(c, "nope", &v), KILN_NOT_FOUND,
              "get_global", "module 'vmtest' has no global 'nope'");
  CHECK(v == NULL);
  CHECK_ERROR(kiln_context_set_global(c, "nope", good_w), KILN_NOT_FOUND, "set_global",
              "module 'vmtest' has no global 'nope'");
  CHECK_ERROR(kiln_context_set_global(c, "W", good_w), KILN_NOT_FOUND, "no global 'W'");
  CHECK_ERROR(kiln_context_set_global(c, "", good_w), KILN_NOT_FOUND, "no global ''");

  /* Wrong dtype / shape / rank name the global, the expected and the given type. */
  CHECK_ERROR(kiln_context_set_global(c, "w", wrong_dtype), KILN_INVALID_ARGUMENT,
              "set_global 'w'", "expects 4xf32, got 4xf64");
  CHECK_ERROR(kiln_context_set_global(c, "w", wrong_shape), KILN_INVALID_ARGUMENT,
              "set_global 'w'", "expects 4xf32, got 5xf32");
  CHECK_ERROR(kiln_context_set_global(c, "w", wrong_rank), KILN_INVALID_ARGUMENT,
              "set_global 'w'", "expects 4xf32, got 2x2xf32");
  CHECK_ERROR(kiln_context_set_global(c, "counter", counter_i32), KILN_INVALID_ARGUMENT,
              "set_global 'counter'", "expects i64, got i32");
  CHECK_ERROR(kiln_context_set_global(c, "counter", counter_vec), KILN_INVALID_ARGUMENT,
              "set_global 'counter'", "expects i64, got 4xf32");

  /* NULL arguments are errors, not crashes. */
  CHECK_ERROR(kiln_context_set_global(c, "w", NULL), KILN_INVALID_ARGUMENT,
              "set_global 'w': value is NULL");
  CHECK_ERROR(kiln_context_set_global(c, NULL, good_w), KILN_INVALID_ARGUMENT,
              "set_global", "NULL");
  CHECK_ERROR(kiln_context_set_global(NULL, "w", good_w), KILN_INVALID_ARGUMENT,
              "set_global", "NULL");
  CHECK_ERROR(kiln_context_get_global(c, NULL, &v), KILN_INVALID_ARGUMENT, "get_global",
              "NULL");
  CHECK_ERROR(kiln_context_get_global(NULL, "w", &v), KILN_INVALID_ARGUMENT, "get_global",
              "NULL");
  CHECK_ERROR(kiln_context_get_global(c, "w", NULL), KILN_INVALID_ARGUMENT, "get_global",
              "NULL");

  /* Nothing was changed by the failed calls. */
  float w[4];
  get_w(c, w);
  CHECK(w[0] == 1.5f && w[1] == 2.0f && w[2] == 3.0f && w[3] == 4.0f);
  CHECK(get_i64(c, "counter") == 7);
  CHECK(step(c, m) == 8);

  kiln_buffer_view_release(wrong_dtype);
  kiln_buffer_view_release(wrong_shape);
  kiln_buffer_view_release(wrong_rank);
  kiln_buffer_view_release(counter_i32);
  kiln_buffer_view_release(counter_vec);
  kiln_buffer_view_release(good_w);
  kiln_context_release(c);
}

int main(void) {
  kiln_instance_t* instance = NULL;
  kiln_module_t* m = NULL;
  kiln_instance_options_t options;
  kiln_instance_options_initialize(&options);
  options.worker_count = 1;
  CHECK_OK(kiln_instance_create(&options, &instance));
  if (instance) {
    CHECK_OK(kiln_module_load_memory(instance, kiln_vm_test_good, sizeof kiln_vm_test_good,
                                     &m));
  }
  if (m) {
    test_read_and_write(m);
    test_checkpoint_by_name(m);
    test_errors(m);
  }
  kiln_module_release(m);
  kiln_instance_release(instance);
  TEST_MAIN_END();
}
