/* Buffer views: dtypes, sizes, alignment, refcounts, wrapping, errors. */
#include <stdint.h>
#include <sys/resource.h>

#include "buffer_internal.h"
#include "memory.h"
#include "test_util.h"

static int keepalive_calls = 0;
static void keepalive_release(void* p) {
  keepalive_calls++;
  CHECK(p == (void*)&keepalive_calls);
}

/* The extent of the mapping holding `p` (/proc/self/maps); 0 when not found. */
static int mapping_of(const void* p, uintptr_t* from, uintptr_t* to) {
  FILE* maps = fopen("/proc/self/maps", "r");
  char line[512];
  int found = 0;
  if (!maps) return 0;
  while (!found && fgets(line, sizeof line, maps)) {
    unsigned long long a, b;
    if (sscanf(line, "%llx-%llx", &a, &b) == 2 && a <= (uintptr_t)p && (uintptr_t)p < b) {
      *from = (uintptr_t)a;
      *to = (uintptr_t)b;
      found = 1;
    }
  }
  fclose(maps);
  return found;
}

int main(void) {
  /* dtype table */
  const char* names[] = {"f32", "f64", "i8", "i16", "i32", "i64", "u8", "bool", "f16", "bf16",
                         "u16", "u32", "u64", "c64", "c128"};
  const size_t sizes[] = {4, 8, 1, 2, 4, 8, 1, 1, 2, 2, 2, 4, 8, 8, 16};
  CHECK(KILN_DTYPE_COUNT == sizeof(sizes) / sizeof(sizes[0]));
  for (int i = 0; i < KILN_DTYPE_COUNT; ++i) {
    CHECK(strcmp(kiln_dtype_name((kiln_dtype_t)i), names[i]) == 0);
    CHECK(kiln_dtype_size((kiln_dtype_t)i) == sizes[i]);
    kiln_dtype_t d;
    CHECK(kiln_dtype_from_name(names[i], &d) == 0 && d == (kiln_dtype_t)i);
  }
  kiln_dtype_t d;
  CHECK(kiln_dtype_from_name("f128", &d) != 0);
  CHECK(kiln_dtype_from_name(NULL, &d) != 0);
  CHECK(kiln_dtype_size((kiln_dtype_t)42) == 0);

  /* create with data */
  int64_t shape[2] = {2, 3};
  float values[6] = {1, 2, 3, 4, 5, 6};
  kiln_buffer_view_t* v = NULL;
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_F32, 2, shape, values, sizeof(values), &v));
  CHECK(v != NULL);
  if (v) {
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_F32);
    CHECK(kiln_buffer_view_rank(v) == 2);
    CHECK(kiln_buffer_view_shape(v)[0] == 2 && kiln_buffer_view_shape(v)[1] == 3);
    CHECK(kiln_buffer_view_element_count(v) == 6);
    CHECK(kiln_buffer_view_byte_size(v) == 24);
    CHECK(((uintptr_t)kiln_buffer_view_data(v) % 64) == 0);
    CHECK(memcmp(kiln_buffer_view_data(v), values, sizeof(values)) == 0);
    CHECK(kiln_buffer_view_mutable_data(v) == kiln_buffer_view_data(v));
    CHECK(kiln_buffer_view_has_type(v, KILN_DTYPE_F32, 2, shape));
    int64_t other[2] = {3, 2};
    CHECK(!kiln_buffer_view_has_type(v, KILN_DTYPE_F32, 2, other));
    CHECK(!kiln_buffer_view_has_type(v, KILN_DTYPE_I32, 2, shape));
    CHECK(!kiln_buffer_view_has_type(v, KILN_DTYPE_F32, 1, shape));
    CHECK(kiln_buffer_view_is_exclusive(v)); /* one reference, the runtime's memory */
    kiln_buffer_view_retain(v);
    CHECK(!kiln_buffer_view_is_exclusive(v)); /* two holders */
    kiln_buffer_view_release(v);
    CHECK(kiln_buffer_view_is_exclusive(v));
    kiln_buffer_view_release(v);
  }
  kiln_buffer_view_release(NULL);

  /* zero fill, scalars, empty arrays */
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_I64, 0, NULL, NULL, 0, &v));
  if (v) {
    CHECK(kiln_buffer_view_element_count(v) == 1);
    CHECK(kiln_buffer_view_byte_size(v) == 8);
    CHECK(*(const int64_t*)kiln_buffer_view_data(v) == 0);
    kiln_buffer_view_release(v);
  }
  int64_t empty[3] = {4, 0, 5};
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_F64, 3, empty, NULL, 0, &v));
  if (v) {
    CHECK(kiln_buffer_view_element_count(v) == 0);
    CHECK(kiln_buffer_view_byte_size(v) == 0);
    CHECK(kiln_buffer_view_data(v) != NULL);
    kiln_buffer_view_release(v);
  }
  int64_t big[1] = {1000};
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_U8, 1, big, NULL, 0, &v));
  if (v) {
    const uint8_t* p = kiln_buffer_view_data(v);
    int all_zero = 1;
    for (int i = 0; i < 1000; ++i) all_zero &= p[i] == 0;
    CHECK(all_zero);
    kiln_buffer_view_release(v);
  }

  /* allocate: uninitialized but aligned, padded tail zeroed */
  int64_t odd[1] = {3};
  CHECK_OK(kiln_buffer_view_allocate(KILN_DTYPE_I8, 1, odd, &v));
  if (v) {
    CHECK(((uintptr_t)kiln_buffer_view_data(v) % 64) == 0);
    const uint8_t* p = kiln_buffer_view_data(v);
    int tail_zero = 1;
    for (int i = 3; i < 64; ++i) tail_zero &= p[i] == 0;
    CHECK(tail_zero);
    kiln_buffer_view_release(v);
  }

  /* errors */
  CHECK_ERROR(kiln_buffer_view_create(KILN_DTYPE_F32, 2, shape, values, 20, &v),
              KILN_INVALID_ARGUMENT, "2x3xf32", "expected 24 bytes", "got 20");
  CHECK(v == NULL);
  int64_t negative[2] = {2, -1};
  CHECK_ERROR(kiln_buffer_view_create(KILN_DTYPE_F32, 2, negative, NULL, 0, &v),
              KILN_INVALID_ARGUMENT, "dimension 1", "-1");
  int64_t huge[3] = {INT64_MAX, INT64_MAX, 4};
  CHECK_ERROR(kiln_buffer_view_create(KILN_DTYPE_F32, 3, huge, NULL, 0, &v),
              KILN_INVALID_ARGUMENT, "too large");
  int64_t nearly[1] = {INT64_MAX / 2};
  CHECK_ERROR(kiln_buffer_view_create(KILN_DTYPE_F64, 1, nearly, NULL, 0, &v),
              KILN_INVALID_ARGUMENT, "too large");
  int64_t deep[KILN_MAX_RANK + 1];
  for (int i = 0; i <= KILN_MAX_RANK; ++i) deep[i] = 1;
  CHECK_ERROR(kiln_buffer_view_create(KILN_DTYPE_F32, KILN_MAX_RANK + 1, deep, NULL, 0, &v),
              KILN_INVALID_ARGUMENT, "rank 17", "16");
  CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_F32, KILN_MAX_RANK, deep, NULL, 0, &v));
  kiln_buffer_view_release(v);
  CHECK_ERROR(kiln_buffer_view_create((kiln_dtype_t)77, 0, NULL, NULL, 0, &v),
              KILN_INVALID_ARGUMENT, "dtype 77");
  CHECK_ERROR(kiln_buffer_view_create(KILN_DTYPE_F32, 2, NULL, NULL, 0, &v),
              KILN_INVALID_ARGUMENT, "shape is NULL");
  CHECK_ERROR(kiln_buffer_view_create(KILN_DTYPE_F32, 0, NULL, NULL, 0, NULL),
              KILN_INVALID_ARGUMENT, "out");

  /* byte sizes */
  size_t n = 0;
  CHECK(kiln_compute_byte_size(KILN_DTYPE_F32, 2, shape, &n) == 0 && n == 24);
  CHECK(kiln_compute_byte_size(KILN_DTYPE_F32, 3, huge, &n) != 0);
  int64_t zero_then_huge[3] = {0, INT64_MAX, INT64_MAX};
  CHECK(kiln_compute_byte_size(KILN_DTYPE_F32, 3, zero_then_huge, &n) == 0 && n == 0);

  /* wrapping borrowed memory */
  _Alignas(64) static int32_t table[16];
  for (int i = 0; i < 16; ++i) table[i] = i;
  int64_t wshape[2] = {4, 4};
  CHECK_OK(kiln_buffer_view_wrap(KILN_DTYPE_I32, 2, wshape, table, sizeof(table),
                                 keepalive_release, &keepalive_calls, &v));
  if (v) {
    CHECK(kiln_buffer_view_data(v) == table);
    CHECK(kiln_buffer_view_mutable_data(v) == NULL); /* read-only */
    CHECK(!kiln_buffer_view_is_exclusive(v));        /* the caller's memory */
    kiln_buffer_view_retain(v);
    kiln_buffer_view_release(v);
    CHECK(keepalive_calls == 0);
    kiln_buffer_view_release(v);
    CHECK(keepalive_calls == 1);
  }
  CHECK_ERROR(kiln_buffer_view_wrap(KILN_DTYPE_I32, 2, wshape, table, 60, NULL, NULL, &v),
              KILN_INVALID_ARGUMENT, "expected 64 bytes", "got 60");
  /* Element alignment is enough: memory at any multiple of the element's size
   * (at most 8) is wrapped in place. */
  CHECK(kiln_dtype_alignment(KILN_DTYPE_I8) == 1 && kiln_dtype_alignment(KILN_DTYPE_F16) == 2 &&
        kiln_dtype_alignment(KILN_DTYPE_F32) == 4 && kiln_dtype_alignment(KILN_DTYPE_F64) == 8 &&
        kiln_dtype_alignment(KILN_DTYPE_BOOL) == 1 && kiln_dtype_alignment((kiln_dtype_t)-1) == 0);
  int64_t three[1] = {3};
  CHECK_OK(kiln_buffer_view_wrap(KILN_DTYPE_I32, 1, three, table + 1, 12, NULL, NULL, &v));
  if (v) {
    CHECK(kiln_buffer_view_data(v) == table + 1);
    CHECK(((const int32_t*)kiln_buffer_view_data(v))[2] == 3);
    kiln_buffer_view_release(v);
  }
  CHECK_OK(kiln_buffer_view_wrap(KILN_DTYPE_I8, 0, NULL, (char*)table + 1, 1, NULL, NULL, &v));
  if (v) CHECK(kiln_buffer_view_data(v) == (char*)table + 1);
  kiln_buffer_view_release(v);
  CHECK_ERROR(kiln_buffer_view_wrap(KILN_DTYPE_I32, 1, three, (char*)table + 2, 12, NULL, NULL, &v),
              KILN_INVALID_ARGUMENT, "is not aligned to its i32 elements (a multiple of 4 bytes)");
  CHECK_ERROR(kiln_buffer_view_wrap(KILN_DTYPE_F64, 1, three, (char*)table + 4, 24, NULL, NULL, &v),
              KILN_INVALID_ARGUMENT, "is not aligned to its f64 elements (a multiple of 8 bytes)");
  CHECK(keepalive_calls == 1);

  /* Large buffers (memory.h): from KILN_MAPPED_BUFFER_MIN bytes up a mapping
   * of its own whose view starts on a huge-page boundary (the mapping's
   * 64-byte record, the header, then the data); below it aligned_alloc. The
   * same contract either way: zeroed by create, 64-byte aligned data, the
   * tail padding zeroed, writable, exclusive while one reference holds it. */
  {
    const size_t big_sizes[] = {KILN_MAPPED_BUFFER_MIN - 4096, KILN_MAPPED_BUFFER_MIN,
                                KILN_MAPPED_BUFFER_MIN + 4099};
    for (size_t k = 0; k < sizeof big_sizes / sizeof *big_sizes; ++k) {
      int64_t n[1] = {(int64_t)big_sizes[k]};
      v = NULL;
      CHECK_OK(kiln_buffer_view_create(KILN_DTYPE_U8, 1, n, NULL, 0, &v));
      if (!v) continue;
      unsigned char* data = kiln_buffer_view_mutable_data(v);
      CHECK(data == kiln_buffer_view_data(v) && ((uintptr_t)data % 64) == 0);
      if (kiln_memory_is_mapped(big_sizes[k], KILN_MAPPED_BUFFER_MIN))
        CHECK((uintptr_t)data % KILN_HUGE_PAGE_SIZE < 4096);
      CHECK(data[0] == 0 && data[big_sizes[k] / 2] == 0 && data[big_sizes[k] - 1] == 0);
      for (size_t b = big_sizes[k]; b % 64; ++b) CHECK(data[b] == 0); /* tail padding */
      data[0] = 7;
      data[big_sizes[k] - 1] = 9;
      CHECK(data[0] == 7 && data[big_sizes[k] - 1] == 9);
      CHECK(kiln_buffer_view_is_exclusive(v));
      kiln_buffer_view_retain(v);
      CHECK(!kiln_buffer_view_is_exclusive(v));
      kiln_buffer_view_release(v);
      CHECK(kiln_buffer_view_is_exclusive(v));
      kiln_buffer_view_release(v);
    }
    /* An unwritten allocation (the VM's alloc) reads as zeros once zeroed: a
     * heap one by a memset over its stale bytes, a mapping of its own as it
     * is, without touching (faulting in) its pages. */
    for (size_t k = 0; k < 2; ++k) {
      int64_t n[1] = {k ? (int64_t)KILN_MAPPED_BUFFER_MIN : 4096};
      int mapped = kiln_memory_is_mapped((size_t)n[0] + 4096, KILN_MAPPED_BUFFER_MIN);
      struct rusage before, after;
      v = NULL;
      CHECK_OK(kiln_buffer_view_allocate(KILN_DTYPE_U8, 1, n, &v));
      if (!v) continue;
      unsigned char* data = kiln_buffer_view_mutable_data(v);
      if (!mapped) memset(data, 0xab, (size_t)n[0]); /* stale bytes */
      kiln_buffer_view_mark_unwritten(v);
      getrusage(RUSAGE_SELF, &before);
      kiln_buffer_view_zero_if_unwritten(v);
      getrusage(RUSAGE_SELF, &after);
      if (mapped) CHECK(after.ru_minflt == before.ru_minflt);
      CHECK(data[0] == 0 && data[n[0] / 2] == 0 && data[n[0] - 1] == 0);
      kiln_buffer_view_release(v);
    }
    /* The allocator itself: 64-byte aligned both ways, NULL frees nothing, and
     * a size no mapping can hold fails cleanly. */
    uintptr_t from = 0, to = 0;
    for (int mapped = 0; mapped < 2; ++mapped) {
      int use = mapped && kiln_memory_is_mapped(KILN_HUGE_PAGE_SIZE, KILN_HUGE_PAGE_SIZE);
      unsigned char* p = kiln_memory_alloc(KILN_HUGE_PAGE_SIZE + 64, use);
      CHECK(p && (uintptr_t)p % 64 == 0);
      if (p && use) {
        /* Past the record, in a mapping of exactly the record and the memory
         * (page-rounded): no whole huge page of it past the end. */
        CHECK((uintptr_t)p % KILN_HUGE_PAGE_SIZE == 64);
        CHECK(mapping_of(p, &from, &to));
        CHECK(from == (uintptr_t)p - 64 && to == (uintptr_t)p + KILN_HUGE_PAGE_SIZE + 4096 - 64);
      }
      if (p) p[0] = p[KILN_HUGE_PAGE_SIZE + 63] = 1;
      kiln_memory_free(p, use);
      kiln_memory_free(NULL, use);
      if (use) CHECK(kiln_memory_alloc(SIZE_MAX - 64, use) == NULL); /* (ASan stops at huge mallocs) */
    }
    CHECK(!kiln_memory_is_mapped(KILN_MAPPED_ARENA_MIN - 1, KILN_MAPPED_ARENA_MIN));
  }

  /* formatting types */
  char buf[64];
  kiln_format_type(KILN_DTYPE_F32, 2, shape, buf, sizeof(buf));
  CHECK(strcmp(buf, "2x3xf32") == 0);
  kiln_format_type(KILN_DTYPE_BOOL, 0, NULL, buf, sizeof(buf));
  CHECK(strcmp(buf, "bool") == 0);
  kiln_format_type(KILN_DTYPE_F32, 2, shape, buf, 4);
  CHECK(strlen(buf) < 4);
  TEST_MAIN_END();
}
