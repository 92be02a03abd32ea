/* Caller-provided transient storage (kiln_context_set_transient_storage):
 * module kiln_vm_test_arena (gen_vm_test_modules.py), whose `fill` writes its
 * argument into element 2 of a 4-float buffer at offset 0 of its 64-byte
 * arena and whose `plain` has no arena. The call must write the caller's
 * storage (and nothing past the buffer), every error is named, and NULL gives
 * the context its own arena back. */
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "vm_test_modules.h"

static int64_t call(kiln_context_t* c, kiln_function_t f, int64_t x) {
  kiln_buffer_view_t* arg = NULL;
  kiln_buffer_view_t* result = NULL;
  int64_t got = -1;
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &x, sizeof x, &arg));
  CHECK_OK(kiln_context_invoke(c, f, &arg, 1, &result, 1));
  if (result) memcpy(&got, kiln_buffer_view_data(result), sizeof got);
  kiln_buffer_view_release(result);
  kiln_buffer_view_release(arg);
  return got;
}

int main(void) {
  kiln_instance_t* inst = NULL;
  kiln_module_t* m = NULL;
  kiln_module_t* other = NULL;
  kiln_context_t* c = NULL;
  kiln_function_t fill, plain, foreign;
  alignas(64) static uint8_t storage[192];
  float values[4];
  size_t i;
  CHECK_OK(kiln_instance_create(NULL, &inst));
  CHECK_OK(kiln_module_load_memory(inst, kiln_vm_test_arena, sizeof kiln_vm_test_arena, &m));
  CHECK_OK(kiln_module_load_memory(inst, kiln_vm_test_safety, sizeof kiln_vm_test_safety, &other));
  CHECK_OK(kiln_context_create(m, &c));
  CHECK_OK(kiln_module_lookup_function(m, "fill", &fill));
  CHECK_OK(kiln_module_lookup_function(m, "plain", &plain));
  CHECK_OK(kiln_module_lookup_function(other, "fresh", &foreign));
  CHECK(kiln_function_transient_size(fill) == 64);

  /* The context's own arena first, then the caller's: the call writes it. */
  CHECK(call(c, fill, 5) == 5);
  memset(storage, 0xab, sizeof storage);
  CHECK_OK(kiln_context_set_transient_storage(c, fill, storage + 64, 64));
  for (int round = 0; round < 2; ++round) {
    CHECK(call(c, fill, 7 + round) == 7 + round);
    memcpy(values, storage + 64, sizeof values);
    CHECK(values[0] == 0.0f && values[1] == 0.0f && values[2] == (float)(7 + round) && values[3] == 0.0f);
    for (i = 0; i < 64; ++i) CHECK(storage[i] == 0xab);          /* before the storage */
    for (i = 64 + 16; i < sizeof storage; ++i) CHECK(storage[i] == 0xab); /* past the buffer */
  }

  /* Errors, each naming what was wrong; the storage set before stays. */
  CHECK_ERROR(kiln_context_set_transient_storage(c, fill, storage + 8, 128), KILN_INVALID_ARGUMENT,
              "'fill': storage at", "is not aligned to 64 bytes");
  CHECK_ERROR(kiln_context_set_transient_storage(c, fill, storage, 63), KILN_INVALID_ARGUMENT,
              "'fill' needs 64 bytes of transient storage, got 63");
  CHECK_ERROR(kiln_context_set_transient_storage(c, foreign, storage, 64), KILN_INVALID_ARGUMENT,
              "does not belong to this context's module 'vmarena'");
  CHECK_ERROR(kiln_context_set_transient_storage(NULL, fill, storage, 64), KILN_INVALID_ARGUMENT,
              "context is NULL");
  CHECK(call(c, fill, 9) == 9);
  memcpy(values, storage + 64, sizeof values);
  CHECK(values[2] == 9.0f);

  /* A function without an arena accepts storage and leaves it alone. */
  CHECK_OK(kiln_context_set_transient_storage(c, plain, storage + 128, 64));
  CHECK(call(c, plain, 3) == 3);
  for (i = 128; i < sizeof storage; ++i) CHECK(storage[i] == 0xab);

  /* NULL: the context allocates its own arena again; the storage is not written. */
  CHECK_OK(kiln_context_set_transient_storage(c, fill, NULL, 0));
  memset(storage, 0xcd, sizeof storage);
  CHECK(call(c, fill, 11) == 11);
  for (i = 0; i < sizeof storage; ++i) CHECK(storage[i] == 0xcd);

  /* global.take (format 2.6): the global's own buffer when only the context
   * holds it, else a copy, so a value someone holds never changes. */
  {
    kiln_function_t bump;
    kiln_buffer_view_t *g1 = NULL, *g2 = NULL, *g3 = NULL;
    const void* p1 = NULL;
    const float* f;
    CHECK_OK(kiln_module_lookup_function(m, "bump", &bump));
    kiln_buffer_view_t* arg = NULL;
    kiln_buffer_view_t* none = NULL;
    for (int64_t x = 1; x <= 3; ++x) {
      CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &x, sizeof x, &arg));
      CHECK_OK(kiln_context_invoke(c, bump, &arg, 1, &none, 0));
      kiln_buffer_view_release(arg);
      if (x == 1) { /* the initial value is module data: taken as a copy */
        CHECK_OK(kiln_context_get_global(c, "acc", &g1));
        p1 = kiln_buffer_view_data(g1);
        f = p1;
        CHECK(f[0] == 1.0f && f[1] == 6.0f && f[3] == 8.0f);
        kiln_buffer_view_release(g1); /* only the context holds it now */
      } else if (x == 2) { /* updated in place: the same memory */
        CHECK_OK(kiln_context_get_global(c, "acc", &g2));
        CHECK(kiln_buffer_view_data(g2) == p1);
        f = kiln_buffer_view_data(g2);
        CHECK(f[0] == 2.0f && f[1] == 6.0f);
      } else { /* g2 held: a copy was written, g2 keeps its bits */
        CHECK_OK(kiln_context_get_global(c, "acc", &g3));
        CHECK(kiln_buffer_view_data(g3) != kiln_buffer_view_data(g2));
        f = kiln_buffer_view_data(g2);
        CHECK(f[0] == 2.0f && f[1] == 6.0f);
        f = kiln_buffer_view_data(g3);
        CHECK(f[0] == 3.0f && f[1] == 6.0f && f[2] == 7.0f);
      }
    }
    kiln_buffer_view_release(g2);
    kiln_buffer_view_release(g3);
  }

  /* global.store of arena memory copies it: into the global's own buffer
   * when only the context holds it (nothing allocated), else into a new one,
   * so a held value keeps its bits. */
  {
    kiln_function_t stash;
    kiln_buffer_view_t *g1 = NULL, *g2 = NULL, *g3 = NULL;
    const float* f;
    const void* p;
    CHECK_OK(kiln_module_lookup_function(m, "stash", &stash));
    kiln_buffer_view_t* arg = NULL;
    kiln_buffer_view_t* none = NULL;
    CHECK_OK(kiln_context_get_global(c, "acc", &g1));
    p = kiln_buffer_view_data(g1);
    kiln_buffer_view_release(g1); /* only the context holds acc's buffer */
    for (int64_t x = 4; x <= 6; ++x) {
      CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &x, sizeof x, &arg));
      CHECK_OK(kiln_context_invoke(c, stash, &arg, 1, &none, 0));
      kiln_buffer_view_release(arg);
      if (x == 4) { /* copied in place */
        CHECK_OK(kiln_context_get_global(c, "acc", &g2));
        CHECK(kiln_buffer_view_data(g2) == p);
        f = kiln_buffer_view_data(g2);
        CHECK(f[0] == 0.0f && f[1] == 0.0f && f[2] == 0.0f && f[3] == 4.0f);
      } else if (x == 5) { /* g2 held: a new buffer, g2 keeps its bits */
        CHECK_OK(kiln_context_get_global(c, "acc", &g3));
        CHECK(kiln_buffer_view_data(g3) != p);
        f = kiln_buffer_view_data(g2);
        CHECK(f[3] == 4.0f);
        f = kiln_buffer_view_data(g3);
        CHECK(f[3] == 5.0f && f[0] == 0.0f);
        p = kiln_buffer_view_data(g3);
        kiln_buffer_view_release(g2);
        kiln_buffer_view_release(g3); /* acc's new buffer: only the context holds it */
      } else { /* in place again */
        CHECK_OK(kiln_context_get_global(c, "acc", &g1));
        CHECK(kiln_buffer_view_data(g1) == p);
        f = kiln_buffer_view_data(g1);
        CHECK(f[3] == 6.0f && f[2] == 0.0f);
        kiln_buffer_view_release(g1);
      }
    }
  }

  /* buffer.copy (format 2.7): into a buffer of the call's own, never into a
   * read-only one or from a value of another type. */
  {
    kiln_function_t copy, copy_ro, copy_type;
    kiln_buffer_view_t* arg = NULL;
    kiln_buffer_view_t* result = NULL;
    int64_t x = 9;
    CHECK_OK(kiln_module_lookup_function(m, "copy", &copy));
    CHECK_OK(kiln_module_lookup_function(m, "copy_ro", &copy_ro));
    CHECK_OK(kiln_module_lookup_function(m, "copy_type", &copy_type));
    CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &x, sizeof x, &arg));
    for (int round = 0; round < 2; ++round) {
      CHECK_OK(kiln_context_invoke(c, copy, &arg, 1, &result, 1));
      memcpy(values, kiln_buffer_view_data(result), sizeof values);
      CHECK(values[0] == 0.0f && values[1] == 9.0f && values[2] == 0.0f && values[3] == 0.0f);
      kiln_buffer_view_release(result);
      result = NULL;
    }
    CHECK_ERROR(kiln_context_invoke(c, copy_ro, &arg, 1, NULL, 0), KILN_FAILED_PRECONDITION,
                "buffer.copy: dst r0 holds a read-only buffer");
    CHECK_ERROR(kiln_context_invoke(c, copy_type, &arg, 1, NULL, 0), KILN_FAILED_PRECONDITION,
                "buffer.copy: src r0 is i64, expected dst r1's type 4xf32");
    kiln_buffer_view_release(arg);
  }

  /* A 32 MiB arena (runtime-c/src/memory.h: a mapping of its own in huge
   * pages, as is a nested call's arena of that size): wide(x) writes x into
   * the arena's last 64 bytes, calls wide(x - 1) (nested: arenas of their
   * own), then copies the buffer out, so x comes back whatever the nested
   * calls wrote. Then caller storage in its place, and the context's own
   * again (the mapping freed and made anew; ASan/LSan check both). */
  {
    kiln_function_t wide;
    kiln_buffer_view_t* arg = NULL;
    kiln_buffer_view_t* result = NULL;
    const size_t size = (size_t)32 << 20;
    uint8_t* big = aligned_alloc(64, size);
    CHECK_OK(kiln_module_lookup_function(m, "wide", &wide));
    CHECK(kiln_function_transient_size(wide) == size);
    CHECK(big != NULL);
    for (int round = 0; round < 4 && big; ++round) {
      int64_t x = round % 3; /* 0: no nested call; 1, 2: one, two */
      if (round == 2) {
        memset(big + size - 64, 0xab, 64);
        CHECK_OK(kiln_context_set_transient_storage(c, wide, big, size));
      } else if (round == 3) {
        CHECK_OK(kiln_context_set_transient_storage(c, wide, NULL, 0));
      }
      CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, &x, sizeof x, &arg));
      CHECK_OK(kiln_context_invoke(c, wide, &arg, 1, &result, 1));
      kiln_buffer_view_release(arg);
      memset(values, 0xff, sizeof values);
      if (result) memcpy(values, kiln_buffer_view_data(result), sizeof values);
      CHECK(values[0] == 0.0f && values[1] == (float)x && values[2] == 0.0f && values[3] == 0.0f);
      if (round == 2) { /* the caller's storage holds the top call's buffer */
        memcpy(values, big + size - 64, sizeof values);
        CHECK(values[1] == (float)x && values[0] == 0.0f);
      }
      kiln_buffer_view_release(result);
      result = NULL;
    }
    CHECK_OK(kiln_context_set_transient_storage(c, wide, NULL, 0));
    free(big);
  }

  /* Released with caller storage set: the context must not free it (ASan). */
  CHECK_OK(kiln_context_set_transient_storage(c, fill, storage, sizeof storage));
  CHECK(call(c, fill, 12) == 12);
  kiln_context_release(c);
  kiln_module_release(other);
  kiln_module_release(m);
  kiln_instance_release(inst);
  TEST_MAIN_END();
}
