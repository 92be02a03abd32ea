/* Tools I/O: value parsing, printing, .npy and .npz round trips, files made
 * by numpy, malformed files. argv[1]: a scratch directory. */
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>

#include "buffer_internal.h"
#include "kiln_io.h"
#include "numpy_fixtures.h"
#include "test_util.h"

static kiln_buffer_view_t* parse(const char* text) {
  kiln_buffer_view_t* v = NULL;
  kiln_status_t s = kiln_io_parse_value(text, &v);
  if (s) {
    fprintf(stderr, "parse '%s' failed: %s\n", text, kiln_status_message(s));
    kiln_status_free(s);
    kiln_test_failures++;
  }
  return v;
}

static char* print_to_string(const kiln_buffer_view_t* v) {
  char* text = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  kiln_io_print_values(f, v);
  fclose(f);
  return text;
}

static void check_print(const char* value, const char* expected, int line) {
  kiln_buffer_view_t* v = parse(value);
  if (!v) return;
  char* text = print_to_string(v);
  kiln_test_checks++;
  if (strcmp(text, expected) != 0) {
    kiln_test_failures++;
    fprintf(stderr, "%s:%d: printing '%s': expected\n%s---- got\n%s----\n", __FILE__,
            line, value, expected, text);
  }
  free(text);
  kiln_buffer_view_release(v);
}
#define CHECK_PRINT(value, expected) check_print(value, expected, __LINE__)

static int same_view(const kiln_buffer_view_t* a, const kiln_buffer_view_t* b) {
  return a && b &&
         kiln_buffer_view_has_type(b, kiln_buffer_view_dtype(a), kiln_buffer_view_rank(a),
                                   kiln_buffer_view_shape(a)) &&
         memcmp(kiln_buffer_view_data(a), kiln_buffer_view_data(b),
                kiln_buffer_view_byte_size(a)) == 0;
}

static void test_half(void) {
  CHECK(kiln_f32_to_f16(1.0f) == 0x3c00);
  CHECK(kiln_f32_to_f16(-2.0f) == 0xc000);
  CHECK(kiln_f32_to_f16(65504.0f) == 0x7bff);
  CHECK(kiln_f32_to_f16(65520.0f) == 0x7c00);       /* rounds up to inf */
  CHECK(kiln_f32_to_f16(5.9604645e-8f) == 0x0001);  /* smallest subnormal */
  CHECK(kiln_f32_to_f16(2.9802322e-8f) == 0x0000);  /* tie to even: zero */
  CHECK(kiln_f32_to_f16(1.0009765625f) == 0x3c01);
  CHECK(kiln_f32_to_f16(1.00048828125f) == 0x3c00); /* tie to even */
  CHECK((kiln_f32_to_f16(NAN) & 0x7e00) == 0x7e00);
  CHECK(kiln_f32_to_f16(INFINITY) == 0x7c00);
  int ok = 1;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* nan payloads */
    ok &= kiln_f32_to_f16(kiln_f16_to_f32((uint16_t)h)) == h;
  }
  CHECK(ok);
  CHECK(kiln_f16_to_f32(0x0001) == 5.9604645e-8f);
  CHECK(kiln_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(kiln_bf16_to_f32(0x3f80) == 1.0f);
  CHECK(kiln_f32_to_bf16(1.00390625f) == 0x3f80); /* tie to even */
  CHECK(kiln_f32_to_bf16(1.01171875f) == 0x3f82);
  CHECK((kiln_f32_to_bf16(NAN) & 0x7fc0) == 0x7fc0);
}

static void test_parse(void) {
  kiln_buffer_view_t* v = parse("2x3xf32=1,2,3,4,5,6");
  if (v) {
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_F32 && kiln_buffer_view_rank(v) == 2);
    CHECK(kiln_buffer_view_shape(v)[0] == 2 && kiln_buffer_view_shape(v)[1] == 3);
    CHECK(((const float*)kiln_buffer_view_data(v))[5] == 6.0f);
    kiln_buffer_view_release(v);
  }
  v = parse("f32=3.5");
  if (v) {
    CHECK(kiln_buffer_view_rank(v) == 0 && *(const float*)kiln_buffer_view_data(v) == 3.5f);
    kiln_buffer_view_release(v);
  }
  v = parse("4x2xi32=7");
  if (v) {
    int ok = kiln_buffer_view_element_count(v) == 8;
    for (int i = 0; i < 8 && ok; ++i) ok = ((const int32_t*)kiln_buffer_view_data(v))[i] == 7;
    CHECK(ok);
    kiln_buffer_view_release(v);
  }
  v = parse("3xi64");
  if (v) {
    CHECK(((const int64_t*)kiln_buffer_view_data(v))[2] == 0);
    kiln_buffer_view_release(v);
  }
  v = parse("4xbool=1, 0 true False");
  if (v) {
    const uint8_t* b = kiln_buffer_view_data(v);
    CHECK(b[0] == 1 && b[1] == 0 && b[2] == 1 && b[3] == 0);
    kiln_buffer_view_release(v);
  }
  v = parse("2x2xi32=[[1, 2], [3, 4]]");
  if (v) {
    const int32_t* x = kiln_buffer_view_data(v);
    CHECK(x[0] == 1 && x[1] == 2 && x[2] == 3 && x[3] == 4);
    kiln_buffer_view_release(v);
  }
  v = parse("3xf64=nan,-inf,1e300");
  if (v) {
    const double* d = kiln_buffer_view_data(v);
    CHECK(isnan(d[0]) && isinf(d[1]) && d[1] < 0 && d[2] == 1e300);
    kiln_buffer_view_release(v);
  }
  v = parse("2xf16=0.5,-2");
  if (v) {
    const uint16_t* h = kiln_buffer_view_data(v);
    CHECK(h[0] == 0x3800 && h[1] == 0xc000);
    kiln_buffer_view_release(v);
  }
  v = parse("bf16=1");
  if (v) {
    CHECK(*(const uint16_t*)kiln_buffer_view_data(v) == 0x3f80);
    kiln_buffer_view_release(v);
  }
  v = parse("2xu8=0,255");
  kiln_buffer_view_release(v);
  v = parse("3xu16=0,1000,65535");
  if (v) {
    const uint16_t* u = kiln_buffer_view_data(v);
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_U16 && u[1] == 1000 && u[2] == 65535);
    kiln_buffer_view_release(v);
  }
  v = parse("2xu32=7,4294967295");
  if (v) {
    const uint32_t* u = kiln_buffer_view_data(v);
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_U32 && u[0] == 7 && u[1] == UINT32_MAX);
    kiln_buffer_view_release(v);
  }
  v = parse("3xu64=0, 9223372036854775808,18446744073709551615");
  if (v) {
    const uint64_t* u = kiln_buffer_view_data(v);
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_U64 && u[0] == 0 &&
          u[1] == 9223372036854775808ull && u[2] == UINT64_MAX);
    char buf[64];
    kiln_io_format_element(v, 2, buf, sizeof(buf));
    CHECK(strcmp(buf, "18446744073709551615") == 0);
    kiln_buffer_view_release(v);
  }
  v = parse("5xc64=1.5, 2j, 1-2j, -0.25e1+4.5j, nan+infj");
  if (v) {
    const float* c = kiln_buffer_view_data(v);
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_C64 && kiln_buffer_view_byte_size(v) == 40);
    CHECK(c[0] == 1.5f && c[1] == 0 && c[2] == 0 && c[3] == 2 && c[4] == 1 && c[5] == -2 &&
          c[6] == -2.5f && c[7] == 4.5f && c[8] != c[8] && c[9] > 1e38f);
    const char* want[] = {"(1.5+0j)", "2j", "(1-2j)", "(-2.5+4.5j)", "(nan+infj)"};
    for (size_t k = 0; k < 5; ++k) {
      char buf[96];
      kiln_io_format_element(v, k, buf, sizeof(buf));
      CHECK(strcmp(buf, want[k]) == 0);
    }
    kiln_buffer_view_release(v);
  }
  v = parse("2xc128=0.1-0.2j, -1");
  if (v) {
    const double* c = kiln_buffer_view_data(v);
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_C128 && c[0] == 0.1 && c[1] == -0.2 &&
          c[2] == -1 && c[3] == 0);
    char buf[96];
    kiln_io_format_element(v, 0, buf, sizeof(buf));
    CHECK(strcmp(buf, "(0.1-0.2j)") == 0); /* as Python's str(0.1-0.2j) */
    kiln_buffer_view_release(v);
  }
  v = parse("2xi8=-128,127");
  kiln_buffer_view_release(v);
  v = parse("0x3xf32=");
  kiln_test_checks++;
  /* An empty array with no values: reported as "no values"? No: 0 elements
   * accept an empty list. */
  kiln_buffer_view_release(v);

  kiln_buffer_view_t* out = NULL;
  CHECK_ERROR(kiln_io_parse_value("2x3xf32=1,2", &out), KILN_INVALID_ARGUMENT, "2x3xf32",
              "expected 6", "got 2");
  CHECK_ERROR(kiln_io_parse_value("2xf32=1,2,3", &out), KILN_INVALID_ARGUMENT,
              "expected 2", "got 3");
  CHECK_ERROR(kiln_io_parse_value("2x3xf33=1", &out), KILN_INVALID_ARGUMENT,
              "unknown dtype 'f33'");
  CHECK_ERROR(kiln_io_parse_value("2xc64=1,1+j", &out), KILN_INVALID_ARGUMENT,
              "value 1 '1+j' is not a complex number", "such as 1.5, 2j, 1-2j");
  CHECK_ERROR(kiln_io_parse_value("2xax3xf32=1", &out), KILN_INVALID_ARGUMENT,
              "dimension 'a'");
  CHECK_ERROR(kiln_io_parse_value("2x-3xf32=1", &out), KILN_INVALID_ARGUMENT,
              "dimension '-3'");
  CHECK_ERROR(kiln_io_parse_value("2xxf32=1", &out), KILN_INVALID_ARGUMENT,
              "empty dimension");
  CHECK_ERROR(kiln_io_parse_value("99999999999999999999xf32=1", &out),
              KILN_INVALID_ARGUMENT, "too large");
  CHECK_ERROR(kiln_io_parse_value("4611686018427387904x4xf32=1", &out),
              KILN_INVALID_ARGUMENT, "too large");
  CHECK_ERROR(kiln_io_parse_value("1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1xf32=1", &out),
              KILN_INVALID_ARGUMENT, "more than 16");
  CHECK_ERROR(kiln_io_parse_value("f32=abc", &out), KILN_INVALID_ARGUMENT,
              "value 0 'abc' is not a number");
  CHECK_ERROR(kiln_io_parse_value("2xi32=1,2.5", &out), KILN_INVALID_ARGUMENT,
              "value 1 '2.5' is not an integer");
  CHECK_ERROR(kiln_io_parse_value("i8=128", &out), KILN_INVALID_ARGUMENT,
              "out of range for i8", "-128..127");
  CHECK_ERROR(kiln_io_parse_value("u8=-1", &out), KILN_INVALID_ARGUMENT, "out of range");
  CHECK_ERROR(kiln_io_parse_value("u16=65536", &out), KILN_INVALID_ARGUMENT,
              "out of range for u16", "0..65535");
  CHECK_ERROR(kiln_io_parse_value("u32=-1", &out), KILN_INVALID_ARGUMENT,
              "out of range for u32", "0..4294967295");
  CHECK_ERROR(kiln_io_parse_value("u64=-1", &out), KILN_INVALID_ARGUMENT,
              "value 0 '-1' is out of range for u64", "0..18446744073709551615");
  CHECK_ERROR(kiln_io_parse_value("u64=18446744073709551616", &out), KILN_INVALID_ARGUMENT,
              "out of range for u64");
  CHECK_ERROR(kiln_io_parse_value("u64=1.5", &out), KILN_INVALID_ARGUMENT,
              "'1.5' is not an integer");
  CHECK_ERROR(kiln_io_parse_value("i64=99999999999999999999", &out), KILN_INVALID_ARGUMENT,
              "out of range");
  CHECK_ERROR(kiln_io_parse_value("bool=2", &out), KILN_INVALID_ARGUMENT, "not a bool");
  CHECK_ERROR(kiln_io_parse_value("3xf32=", &out), KILN_INVALID_ARGUMENT, "no values",
              "expected 3");
  CHECK_ERROR(kiln_io_parse_value("", &out), KILN_INVALID_ARGUMENT, "empty type");
  CHECK_ERROR(kiln_io_parse_value("=1", &out), KILN_INVALID_ARGUMENT, "empty type");
  CHECK_ERROR(kiln_io_parse_value("@", &out), KILN_INVALID_ARGUMENT, ".npy file path");
  CHECK_ERROR(kiln_io_parse_value("@/nonexistent/x.npy", &out), KILN_NOT_FOUND,
              "/nonexistent/x.npy");
  CHECK(out == NULL);
}

static void test_print(void) {
  CHECK_PRINT("2x3xf32=1,2,3,4,5,6", "[[1. 2. 3.]\n [4. 5. 6.]]\n");
  CHECK_PRINT("3xf32=0.1,-2.5,100", "[  0.1  -2.5 100. ]\n"); /* as numpy */
  CHECK_PRINT("4xf32=12,24.5,-24,8.125", "[ 12.     24.5   -24.      8.125]\n");
  CHECK_PRINT("2xf64=nan,1.5", "[nan 1.5]\n");
  CHECK_PRINT("f32=3.5", "3.5\n");
  CHECK_PRINT("f64=100", "100.0\n");
  CHECK_PRINT("f32=1e-5", "1e-05\n");
  CHECK_PRINT("f64=0.1", "0.1\n");
  CHECK_PRINT("3xi32=1,-20,300", "[  1 -20 300]\n");
  CHECK_PRINT("2xbool=1,0", "[ True False]\n");
  CHECK_PRINT("2x2x2xi8=1,2,3,4,5,6,7,8", "[[[1 2]\n  [3 4]]\n\n [[5 6]\n  [7 8]]]\n");
  CHECK_PRINT("0x4xf32", "[]\n");
  /* The expected strings are numpy's str() of the same arrays. */
  CHECK_PRINT("2xf16=0.1,65504", "[1.00e-01 6.55e+04]\n");
  CHECK_PRINT("3xf32=1e-5,1,2.5", "[1.0e-05 1.0e+00 2.5e+00]\n");
  CHECK_PRINT("3xf64=1e100,1,-1e-5", "[ 1.e+100  1.e+000 -1.e-005]\n");
  CHECK_PRINT("30xf32=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,"
              "26,27,28,29",
              "[ 0.  1.  2.  3.  4.  5.  6.  7.  8.  9. 10. 11. 12. 13. 14. 15. 16. 17.\n"
              " 18. 19. 20. 21. 22. 23. 24. 25. 26. 27. 28. 29.]\n");
  CHECK_PRINT("3xf32=nan,inf,-inf", "[ nan  inf -inf]\n");
  CHECK_PRINT("bf16=3.140625", "3.14\n");
  /* Complex arrays as numpy's str(): real parts and imaginary parts formatted apart. */
  CHECK_PRINT("3xc64=-4+2j,1,6j", "[-4.+2.j  1.+0.j  0.+6.j]\n");
  CHECK_PRINT("2xc128=1.5+2j,3-0.25j", "[1.5+2.j   3. -0.25j]\n");
  CHECK_PRINT("2xc64=1e-5+1j,2+3e9j", "[1.e-05+1.e+00j 2.e+00+3.e+09j]\n");
  CHECK_PRINT("3xc128=nan+1j,1+infj,-inf+nanj", "[ nan +1.j   1.+infj -inf+nanj]\n");
  CHECK_PRINT("2x2xc128=0.1+0.2j,-0.3j,1,-2-2j", "[[ 0.1+0.2j  0. -0.3j]\n [ 1. +0.j  -2. -2.j ]]\n");
  CHECK_PRINT("c64=1-2.5j", "(1-2.5j)\n");
  CHECK_PRINT("12xc64=0,1+0.5j,2+1j,3+1.5j,4+2j,5+2.5j,6+3j,7+3.5j,8+4j,9+4.5j,10+5j,21+10.5j",
              "[ 0. +0.j   1. +0.5j  2. +1.j   3. +1.5j  4. +2.j   5. +2.5j  6. +3.j\n"
              "  7. +3.5j  8. +4.j   9. +4.5j 10. +5.j  21.+10.5j]\n");
  kiln_buffer_view_t* v = parse("2000xi32=5");
  if (v) {
    char* text = print_to_string(v);
    CHECK(strcmp(text, "[5 5 5 ... 5 5 5]\n") == 0);
    free(text);
    kiln_buffer_view_release(v);
  }
  v = parse("100x100xu8=1");
  if (v) {
    char* text = print_to_string(v);
    const char* head = "[[1 1 1 ... 1 1 1]\n [1 1 1 ... 1 1 1]\n [1 1 1 ... 1 1 1]\n ...\n";
    CHECK(strncmp(text, head, strlen(head)) == 0);
    if (strncmp(text, head, strlen(head)) != 0) fprintf(stderr, "got:\n%s", text);
    free(text);
    kiln_buffer_view_release(v);
  }
  char buf[64];
  v = parse("3xf64=0.30000000000000004,1e-300,123456789");
  if (v) {
    kiln_io_format_element(v, 0, buf, sizeof(buf));
    CHECK(strcmp(buf, "0.30000000000000004") == 0);
    kiln_io_format_element(v, 1, buf, sizeof(buf));
    CHECK(strcmp(buf, "1e-300") == 0);
    kiln_io_format_element(v, 2, buf, sizeof(buf));
    CHECK(strcmp(buf, "123456789.0") == 0); /* as numpy's scalar str() */
    kiln_buffer_view_release(v);
  }
}

static void test_npy(const char* dir) {
  const char* values[] = {
      "2x3xf32=1,2,3,4,5,6.5", "f64=-0.25",     "4xi8=-1,2,-3,4",
      "2x2xi16=1,2,3,-4",      "3xi32=7,8,9",   "2xi64=-9000000000000,1",
      "3xu8=0,128,255",        "2xbool=1,0",    "2xf16=0.5,-3",
      "2xbf16=1,-2",           "0x5xf32",       "1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1xi32=3",
      "3xu16=0,1,65535",       "2xu32=5,4294967295", "2xu64=3,18446744073709551615",
      "2xc64=1+2j,-3.5j",      "2x1xc128=0.1-0.2j,nan+infj",
  };
  char path[1024];
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); ++i) {
    kiln_buffer_view_t* v = parse(values[i]);
    if (!v) continue;
    snprintf(path, sizeof(path), "%s/v%zu.npy", dir, i);
    CHECK_OK(kiln_npy_write_file(path, v));
    kiln_buffer_view_t* back = NULL;
    CHECK_OK(kiln_npy_read_file(path, &back));
    /* bf16 is written as its raw bits, '<u2', which reads as u16: bf16 again where
     * bf16 is expected. */
    kiln_dtype_t dtype = kiln_buffer_view_dtype(v);
    if (back && dtype == KILN_DTYPE_BF16) {
      CHECK(kiln_buffer_view_dtype(back) == KILN_DTYPE_U16);
      CHECK_OK(kiln_io_bf16_from_bits(&back, KILN_DTYPE_BF16));
    }
    CHECK(same_view(v, back));
    /* "@path" parses the same file. */
    char at[1100];
    snprintf(at, sizeof(at), "@%s", path);
    kiln_buffer_view_t* back2 = parse(at);
    if (back2) CHECK_OK(kiln_io_bf16_from_bits(&back2, dtype));
    CHECK(same_view(v, back2));
    /* Encoded data starts 64-byte aligned. */
    uint8_t* bytes = NULL;
    size_t size = 0;
    CHECK_OK(kiln_npy_encode(v, &bytes, &size));
    CHECK(bytes && (size - kiln_buffer_view_byte_size(v)) % 64 == 0);
    free(bytes);
    kiln_buffer_view_release(back2);
    kiln_buffer_view_release(back);
    kiln_buffer_view_release(v);
  }

  /* Files written by numpy. */
  kiln_buffer_view_t* v = NULL;
  CHECK_OK(kiln_npy_decode(np_f8_big_endian, sizeof(np_f8_big_endian), "be", &v));
  if (v) {
    const double* d = kiln_buffer_view_data(v);
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_F64 && d[0] == 1.5 && d[1] == -2.25 &&
          d[2] == 3.0);
    kiln_buffer_view_release(v);
  }
  CHECK_OK(kiln_npy_decode(np_i4_fortran, sizeof(np_i4_fortran), "fortran", &v));
  if (v) {
    const int32_t* x = kiln_buffer_view_data(v);
    int ok = kiln_buffer_view_shape(v)[0] == 2 && kiln_buffer_view_shape(v)[1] == 3;
    for (int i = 0; i < 6; ++i) ok &= x[i] == i;
    CHECK(ok);
    kiln_buffer_view_release(v);
  }
  CHECK_OK(kiln_npy_decode(np_f2, sizeof(np_f2), "f2", &v));
  if (v) {
    const uint16_t* h = kiln_buffer_view_data(v);
    CHECK(kiln_buffer_view_dtype(v) == KILN_DTYPE_F16 && h[0] == 0x3800 && h[2] == 0x7bff);
    kiln_buffer_view_release(v);
  }

  /* Big-endian complex: each part is swapped on its own. */
  v = parse("2xc64=1+2j,-3-0.5j");
  if (v) {
    uint8_t* bytes = NULL;
    size_t size = 0;
    CHECK_OK(kiln_npy_encode(v, &bytes, &size));
    char* d = bytes ? strstr((char*)bytes + 10, "<c8") : NULL;
    CHECK(d != NULL);
    if (d) {
      *d = '>';
      uint8_t* data = bytes + size - 16;
      for (size_t k = 0; k < 16; k += 4) {
        uint8_t t0 = data[k], t1 = data[k + 1];
        data[k] = data[k + 3];
        data[k + 1] = data[k + 2];
        data[k + 2] = t1;
        data[k + 3] = t0;
      }
      kiln_buffer_view_t* be = NULL;
      CHECK_OK(kiln_npy_decode(bytes, size, "c8 big endian", &be));
      CHECK(same_view(v, be));
      kiln_buffer_view_release(be);
    }
    free(bytes);
    kiln_buffer_view_release(v);
  }

  /* Malformed files. */
  uint8_t buf[512];
  size_t n = sizeof(np_f2);
  memcpy(buf, np_f2, n);
  CHECK_ERROR(kiln_npy_decode(buf, n - 1, "short.npy", &v), KILN_DATA_LOSS, "short.npy",
              "expected 8 bytes", "got 7");
  CHECK_ERROR(kiln_npy_decode(buf, 5, "tiny.npy", &v), KILN_INVALID_ARGUMENT, "tiny.npy",
              "magic");
  CHECK_ERROR(kiln_npy_decode(buf, 40, "cut.npy", &v), KILN_INVALID_ARGUMENT,
              "runs past the end");
  buf[6] = 9;
  CHECK_ERROR(kiln_npy_decode(buf, n, "v9.npy", &v), KILN_INVALID_ARGUMENT,
              "format version 9.0");
  buf[6] = 1;
  char* descr = strstr((char*)buf + 10, "<f2");
  if (descr) {
    memcpy(descr, "<c4", 3);
    CHECK_ERROR(kiln_npy_decode(buf, n, "complex.npy", &v), KILN_INVALID_ARGUMENT,
                "unsupported .npy dtype '<c4'");
    memcpy(descr, "<f2", 3);
  }
  char* shape = strstr((char*)buf + 10, "(4,)");
  if (shape) {
    memcpy(shape, "(4;)", 4);
    CHECK_ERROR(kiln_npy_decode(buf, n, "shape.npy", &v), KILN_INVALID_ARGUMENT,
                "malformed 'shape'");
    memcpy(shape, "(4,)", 4);
  }
  char* brace = strchr((char*)buf + 10, '{');
  if (brace) {
    *brace = '[';
    CHECK_ERROR(kiln_npy_decode(buf, n, "dict.npy", &v), KILN_INVALID_ARGUMENT, "not a dict");
  }
  snprintf(path, sizeof(path), "%s", dir);
  CHECK_ERROR(kiln_npy_read_file(path, &v), KILN_IO, "cannot read");
  CHECK(v == NULL);
}

static void test_npz(const char* dir) {
  /* numpy.savez output (zip64 local headers). */
  kiln_npz_t npz;
  CHECK_OK(kiln_npz_decode(np_savez, sizeof(np_savez), "np.npz", &npz));
  CHECK(npz.count == 3);
  if (npz.count == 3) {
    CHECK(strcmp(npz.entries[0].name, "a") == 0);
    CHECK(strcmp(npz.entries[1].name, "flags") == 0);
    CHECK(strcmp(npz.entries[2].name, "step") == 0);
    CHECK(((const float*)kiln_buffer_view_data(npz.entries[0].value))[5] == 5.0f);
    CHECK(kiln_buffer_view_dtype(npz.entries[1].value) == KILN_DTYPE_BOOL);
    CHECK(kiln_buffer_view_rank(npz.entries[2].value) == 0);
    CHECK(*(const int64_t*)kiln_buffer_view_data(npz.entries[2].value) == 7);
  }
  /* Written back by us, read again: same arrays, and deterministic bytes. */
  const char* names[3];
  const kiln_buffer_view_t* values[3];
  for (size_t i = 0; i < npz.count && i < 3; ++i) {
    names[i] = npz.entries[i].name;
    values[i] = npz.entries[i].value;
  }
  uint8_t *bytes1 = NULL, *bytes2 = NULL;
  size_t size1 = 0, size2 = 0;
  CHECK_OK(kiln_npz_encode(npz.count, names, values, &bytes1, &size1));
  CHECK_OK(kiln_npz_encode(npz.count, names, values, &bytes2, &size2));
  CHECK(size1 == size2 && bytes1 && bytes2 && memcmp(bytes1, bytes2, size1) == 0);
  char path[1024];
  snprintf(path, sizeof(path), "%s/state.npz", dir);
  CHECK_OK(kiln_npz_write_file(path, npz.count, names, values));
  kiln_npz_t back;
  CHECK_OK(kiln_npz_read_file(path, &back));
  CHECK(back.count == npz.count);
  for (size_t i = 0; i < back.count && i < npz.count; ++i) {
    CHECK(strcmp(back.entries[i].name, npz.entries[i].name) == 0);
    CHECK(same_view(npz.entries[i].value, back.entries[i].value));
  }
  kiln_npz_free(&back);

  /* zip64 records (what large states get) read back the same. */
  uint8_t* z64 = NULL;
  size_t z64_size = 0;
  CHECK_OK(kiln_npz_encode_zip64(npz.count, names, values, 1, &z64, &z64_size));
  CHECK(z64 && z64_size > size1);
  if (z64) {
    CHECK_OK(kiln_npz_decode(z64, z64_size, "zip64.npz", &back));
    CHECK(back.count == npz.count);
    for (size_t i = 0; i < back.count && i < npz.count; ++i) {
      CHECK(strcmp(back.entries[i].name, npz.entries[i].name) == 0);
      CHECK(same_view(npz.entries[i].value, back.entries[i].value));
    }
    kiln_npz_free(&back);
    snprintf(path, sizeof(path), "%s/zip64.npz", dir);
    CHECK_OK(kiln_io_write_file(path, z64, z64_size));
    /* A damaged zip64 locator is reported. */
    z64[z64_size - 22 - 20] ^= 0xff;
    CHECK_ERROR(kiln_npz_decode(z64, z64_size, "z.npz", &back), KILN_INVALID_ARGUMENT,
                "zip64 end-of-central-directory locator");
    free(z64);
  }

  /* Empty archive. */
  uint8_t* empty = NULL;
  size_t empty_size = 0;
  CHECK_OK(kiln_npz_encode(0, NULL, NULL, &empty, &empty_size));
  CHECK_OK(kiln_npz_decode(empty, empty_size, "empty", &back));
  CHECK(back.count == 0);
  kiln_npz_free(&back);
  free(empty);

  /* Compressed entries are refused by name. */
  CHECK_ERROR(kiln_npz_decode(np_savez_compressed, sizeof(np_savez_compressed), "c.npz", &back),
              KILN_UNIMPLEMENTED, "c.npz", "'a.npy' is compressed", "deflate",
              "numpy.savez");
  CHECK(back.count == 0 && back.entries == NULL);

  /* Damage. */
  if (bytes1) {
    uint8_t* copy = malloc(size1);
    memcpy(copy, bytes1, size1);
    copy[100] ^= 0xff; /* inside the first entry's data */
    CHECK_ERROR(kiln_npz_decode(copy, size1, "crc.npz", &back), KILN_DATA_LOSS,
                "'a.npy' is damaged", "CRC-32");
    memcpy(copy, bytes1, size1);
    CHECK_ERROR(kiln_npz_decode(copy, size1 - 1, "cut.npz", &back), KILN_INVALID_ARGUMENT,
                "cut.npz", "end-of-central-directory");
    CHECK_ERROR(kiln_npz_decode(copy, 10, "tiny.npz", &back), KILN_INVALID_ARGUMENT,
                "too short");
    /* Central directory offset pointing past the end. */
    copy[size1 - 6] = 0xff;
    copy[size1 - 5] = 0xff;
    copy[size1 - 4] = 0xff;
    copy[size1 - 3] = 0x7f;
    CHECK_ERROR(kiln_npz_decode(copy, size1, "cd.npz", &back), KILN_INVALID_ARGUMENT,
                "central directory");
    memcpy(copy, bytes1, size1);
    /* A local header offset pointing past the end (first central entry). */
    uint32_t cd = (uint32_t)copy[size1 - 6] | ((uint32_t)copy[size1 - 5] << 8) |
                  ((uint32_t)copy[size1 - 4] << 16) | ((uint32_t)copy[size1 - 3] << 24);
    copy[cd + 42] = 0xf0;
    copy[cd + 43] = 0xff;
    CHECK_ERROR(kiln_npz_decode(copy, size1, "local.npz", &back), KILN_INVALID_ARGUMENT,
                "local header");
    memcpy(copy, bytes1, size1);
    /* Entry size larger than the file. */
    copy[cd + 20] = 0xf0;
    copy[cd + 21] = 0xff;
    copy[cd + 24] = 0xf0;
    copy[cd + 25] = 0xff;
    CHECK_ERROR(kiln_npz_decode(copy, size1, "big.npz", &back), KILN_DATA_LOSS,
                "truncated");
    free(copy);
  }
  free(bytes1);
  free(bytes2);
  kiln_npz_free(&npz);
  CHECK_ERROR(kiln_npz_read_file("/nonexistent/state.npz", &back), KILN_NOT_FOUND,
              "/nonexistent/state.npz");
}

/* Damaged files never crash the decoders (the sanitizer build checks every
 * access): flip every byte of valid files, truncate them everywhere, and
 * parse random value strings. */
static uint32_t rng_state = 12345;
static uint32_t rng(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return rng_state >> 8;
}

static void fuzz_buffer(const uint8_t* valid, size_t size, int npz) {
  uint8_t* copy = malloc(size);
  int outcomes[2] = {0, 0};
  for (size_t cut = 0; cut <= size; ++cut) { /* every truncation */
    memcpy(copy, valid, size);
    kiln_buffer_view_t* v = NULL;
    kiln_npz_t z;
    kiln_status_t s = npz ? kiln_npz_decode(copy, cut, "fuzz", &z)
                          : kiln_npy_decode(copy, cut, "fuzz", &v);
    outcomes[s == NULL]++;
    if (!s && npz) kiln_npz_free(&z);
    kiln_buffer_view_release(v);
    kiln_status_free(s);
  }
  for (size_t i = 0; i < size; ++i) { /* every byte, three ways */
    static const uint8_t values[3] = {0x00, 0xff, 0x80};
    for (int k = 0; k < 3; ++k) {
      memcpy(copy, valid, size);
      copy[i] = (uint8_t)(valid[i] ^ values[k] ^ (uint8_t)rng());
      kiln_buffer_view_t* v = NULL;
      kiln_npz_t z;
      kiln_status_t s = npz ? kiln_npz_decode(copy, size, "fuzz", &z)
                            : kiln_npy_decode(copy, size, "fuzz", &v);
      outcomes[s == NULL]++;
      if (!s && npz) kiln_npz_free(&z);
      kiln_buffer_view_release(v);
      kiln_status_free(s);
    }
  }
  CHECK(outcomes[0] > 0 && outcomes[1] > 0); /* both rejected and accepted cases */
  free(copy);
}

static void test_fuzz(void) {
  fuzz_buffer(np_f8_big_endian, sizeof(np_f8_big_endian), 0);
  fuzz_buffer(np_i4_fortran, sizeof(np_i4_fortran), 0);
  fuzz_buffer(np_savez, sizeof(np_savez), 1);
  static const char alphabet[] = "0123456789x=,.-+ef@ abinxX\t";
  char text[48];
  for (int i = 0; i < 50000; ++i) {
    size_t len = rng() % (sizeof(text) - 1);
    for (size_t k = 0; k < len; ++k) text[k] = alphabet[rng() % (sizeof(alphabet) - 1)];
    text[len] = '\0';
    if (text[0] == '@') text[0] = '2'; /* no file access */
    /* Skip types whose allocation would be huge (a sanitizer aborts on those). */
    char type[48];
    size_t type_len = strcspn(text, "=");
    memcpy(type, text, type_len);
    type[type_len] = '\0';
    kiln_dtype_t dtype;
    size_t rank = 0;
    int64_t shape[KILN_MAX_RANK];
    kiln_status_t ts = kiln_io_parse_type(type, &dtype, &rank, shape);
    size_t bytes = 0;
    int huge = !ts && (kiln_compute_byte_size(dtype, rank, shape, &bytes) != 0 ||
                       bytes > (1u << 20));
    kiln_status_free(ts);
    if (huge) continue;
    kiln_buffer_view_t* v = NULL;
    kiln_status_t s = kiln_io_parse_value(text, &v);
    kiln_status_free(s);
    kiln_buffer_view_release(v);
  }
}

/* "@x.npy", "@x.npz" (every array, in order), "@x.npz:NAME"; files told apart by contents. */
static void test_file_values(const char* dir) {
  char path[1024], text[1100];
  kiln_buffer_view_t* a = parse("3xf32=1,2,3");
  kiln_buffer_view_t* b = parse("2xi64=-4,5");
  kiln_buffer_view_t* c = parse("f64=0.5");
  const char* names[3] = {"b_first", "a", "c"};
  const kiln_buffer_view_t* values[3] = {b, a, c};
  snprintf(path, sizeof(path), "%s/values.npz", dir);
  CHECK_OK(kiln_npz_write_file(path, 3, names, values));

  kiln_npz_t got;
  snprintf(text, sizeof(text), "@%s", path);
  CHECK_OK(kiln_io_parse_values(text, &got));
  CHECK(got.count == 3);
  for (size_t i = 0; i < got.count && i < 3; ++i) {
    CHECK(strcmp(got.entries[i].name, names[i]) == 0);
    CHECK(same_view(values[i], got.entries[i].value));
  }
  kiln_npz_free(&got);
  snprintf(text, sizeof(text), "@%s:a", path);
  CHECK_OK(kiln_io_parse_values(text, &got));
  CHECK(got.count == 1 && strcmp(got.entries[0].name, "a") == 0 && same_view(a, got.entries[0].value));
  kiln_npz_free(&got);
  kiln_buffer_view_t* one = NULL;
  CHECK_OK(kiln_io_parse_value(text, &one));
  CHECK(same_view(a, one));
  kiln_buffer_view_release(one);
  one = NULL;
  /* An inline value and a .npy file are one entry without a name. */
  CHECK_OK(kiln_io_parse_values("2xi64=-4,5", &got));
  CHECK(got.count == 1 && got.entries[0].name == NULL && same_view(b, got.entries[0].value));
  kiln_npz_free(&got);
  snprintf(path, sizeof(path), "%s/c.npy", dir);
  CHECK_OK(kiln_npy_write_file(path, c));
  snprintf(text, sizeof(text), "@%s", path);
  CHECK_OK(kiln_io_parse_values(text, &got));
  CHECK(got.count == 1 && got.entries[0].name == NULL && same_view(c, got.entries[0].value));
  kiln_npz_free(&got);
  /* An archive of one array is one value; the suffix does not decide the format. */
  snprintf(path, sizeof(path), "%s/single.archive", dir);
  CHECK_OK(kiln_npz_write_file(path, 1, names, values));
  snprintf(text, sizeof(text), "@%s", path);
  CHECK_OK(kiln_io_parse_value(text, &one));
  CHECK(same_view(b, one));
  kiln_buffer_view_release(one);
  one = NULL;
  /* A colon in a path without ".npz:" is part of the path. */
  snprintf(path, sizeof(path), "%s/with:colon.npy", dir);
  CHECK_OK(kiln_npy_write_file(path, c));
  snprintf(text, sizeof(text), "@%s", path);
  CHECK_OK(kiln_io_parse_value(text, &one));
  CHECK(same_view(c, one));
  kiln_buffer_view_release(one);
  one = NULL;
  /* An empty archive gives no values. */
  snprintf(path, sizeof(path), "%s/empty.npz", dir);
  CHECK_OK(kiln_npz_write_file(path, 0, NULL, NULL));
  snprintf(text, sizeof(text), "@%s", path);
  CHECK_OK(kiln_io_parse_values(text, &got));
  CHECK(got.count == 0);
  kiln_npz_free(&got);

  /* Errors: several arrays where one is expected, an unknown name, a name in a .npy. */
  snprintf(text, sizeof(text), "@%s/values.npz", dir);
  CHECK_ERROR(kiln_io_parse_value(text, &one), KILN_INVALID_ARGUMENT,
              "values.npz' holds 3 arrays ('b_first', 'a', 'c') where one value is expected",
              "values.npz:NAME");
  CHECK_ERROR(kiln_io_parse_value(strcat(text, ":zz"), &one), KILN_NOT_FOUND,
              "values.npz' has no array 'zz' (arrays: 'b_first', 'a', 'c')");
  snprintf(text, sizeof(text), "@%s/empty.npz", dir);
  CHECK_ERROR(kiln_io_parse_value(text, &one), KILN_INVALID_ARGUMENT, "holds 0 arrays (none)");
  CHECK_ERROR(kiln_io_parse_value(strcat(text, ":a"), &one), KILN_NOT_FOUND,
              "has no array 'a' (arrays: none)");
  snprintf(text, sizeof(text), "@%s/c.npy.npz:a", dir);
  CHECK_ERROR(kiln_io_parse_value(text, &one), KILN_NOT_FOUND, "c.npy.npz");
  snprintf(path, sizeof(path), "%s/c.npz", dir);
  CHECK_OK(kiln_npy_write_file(path, c));
  snprintf(text, sizeof(text), "@%s:a", path);
  CHECK_ERROR(kiln_io_parse_value(text, &one), KILN_INVALID_ARGUMENT,
              "c.npz' is not a .npz archive, so it has no array 'a'");
  CHECK_ERROR(kiln_io_parse_values("@", &got), KILN_INVALID_ARGUMENT, ".npy file path");
  CHECK(got.count == 0 && got.entries == NULL);
  CHECK_ERROR(kiln_io_parse_values("@/nonexistent/x.npz", &got), KILN_NOT_FOUND,
              "/nonexistent/x.npz");
  CHECK_ERROR(kiln_io_parse_values("3xf32=1,2", &got), KILN_INVALID_ARGUMENT,
              "wrong number of values");
  CHECK(got.count == 0 && got.entries == NULL && one == NULL);
  snprintf(path, sizeof(path), "%s/broken.npz", dir);
  CHECK_OK(kiln_io_write_file(path, "PK\x03\x04garbage", 11));
  snprintf(text, sizeof(text), "@%s", path);
  CHECK_ERROR(kiln_io_parse_values(text, &got), KILN_INVALID_ARGUMENT, "broken.npz",
              "not a valid .npz file");
  kiln_buffer_view_release(a);
  kiln_buffer_view_release(b);
  kiln_buffer_view_release(c);
}

static void check_compare(const char* got_text, const char* expected_text,
                          const kiln_io_tolerance_t* tolerance, const char* message, int line) {
  kiln_buffer_view_t* got = parse(got_text);
  kiln_buffer_view_t* expected = parse(expected_text);
  if (got && expected) {
    kiln_status_t s = kiln_io_compare(got, expected, tolerance);
    kiln_test_checks++;
    if (message ? !s || kiln_status_code(s) != KILN_FAILED_PRECONDITION ||
                      strcmp(kiln_status_message(s), message) != 0
                : s != NULL) {
      kiln_test_failures++;
      fprintf(stderr, "%s:%d: compare '%s' with '%s': expected %s, got %s\n", __FILE__, line,
              got_text, expected_text, message ? message : "a match",
              s ? kiln_status_message(s) : "a match");
    }
    kiln_status_free(s);
  }
  kiln_buffer_view_release(got);
  kiln_buffer_view_release(expected);
}
#define CHECK_MATCH(got, expected, tolerance) check_compare(got, expected, tolerance, NULL, __LINE__)
#define CHECK_MISMATCH(got, expected, tolerance, message) \
  check_compare(got, expected, tolerance, message, __LINE__)

static void test_compare(void) {
  kiln_io_tolerance_t t;
  kiln_io_tolerance_initialize(&t);
  CHECK(t.f16 == 1e-3 && t.f32 == 1e-4 && t.f64 == 1e-4);
  CHECK_MATCH("3xf32=1,2,3", "3xf32=1,2,3.00009", NULL);
  CHECK_MISMATCH("3xf32=1,2,3", "3xf32=1,2,3.0002", NULL,
                 "element [2] (the first that differs): got 3.0, expected 3.0002 "
                 "(difference 0.0002 > the f32 threshold 0.0001)");
  CHECK_MISMATCH("2x2xf64=1,2,3,4", "2x2xf64=1,2,3,4.5", NULL,
                 "element [1, 1] (the first that differs): got 4.0, expected 4.5 "
                 "(difference 0.5 > the f64 threshold 0.0001)");
  CHECK_MISMATCH("f32=1", "f32=2", NULL,
                 "element [] (the first that differs): got 1.0, expected 2.0 "
                 "(difference 1 > the f32 threshold 0.0001)");
  /* NaN matches NaN, infinities match themselves only. */
  CHECK_MATCH("4xf32=nan,inf,-inf,0", "4xf32=nan,inf,-inf,-0", NULL);
  CHECK_MISMATCH("2xf32=1,nan", "2xf32=1,2", NULL,
                 "element [1] (the first that differs): got nan, expected 2.0");
  CHECK_MISMATCH("2xf64=3,1", "2xf64=nan,1", NULL,
                 "element [0] (the first that differs): got 3.0, expected nan");
  CHECK_MISMATCH("f64=inf", "f64=-inf", NULL,
                 "element [] (the first that differs): got inf, expected -inf");
  CHECK_MISMATCH("f32=1e30", "f32=inf", NULL,
                 "element [] (the first that differs): got 1e+30, expected inf");
  /* Each float dtype under its own threshold; bf16 under f16's. */
  t.f32 = 0.5;
  CHECK_MATCH("2xf32=1,2", "2xf32=1.5,1.5", &t);
  CHECK_MISMATCH("2xf64=1,2", "2xf64=1.5,1.5", &t,
                 "element [0] (the first that differs): got 1.0, expected 1.5 "
                 "(difference 0.5 > the f64 threshold 0.0001)");
  CHECK_MATCH("f16=1", "f16=1.0009765625", NULL);
  CHECK_MISMATCH("f16=1", "f16=1.001953125", NULL,
                 "element [] (the first that differs): got 1.0, expected 1.002 "
                 "(difference 0.00195 > the f16 threshold 0.001)");
  CHECK_MISMATCH("bf16=1", "bf16=1.0078125", NULL,
                 "element [] (the first that differs): got 1.0, expected 1.01 "
                 "(difference 0.00781 > the f16 threshold 0.001)");
  t.f16 = 0.01;
  CHECK_MATCH("bf16=1", "bf16=1.0078125", &t);
  /* Complex: each part under the threshold of its float dtype. */
  CHECK_MATCH("2xc64=1+2j,nan+1j", "2xc64=1.00005+1.99995j,nan+1j", NULL);
  CHECK_MISMATCH("2xc128=1+2j,3", "2xc128=1+2j,3+0.001j", NULL,
                 "element [1] (the first that differs): got (3+0j), expected (3+0.001j) "
                 "(difference 0.001 > the f64 threshold 0.0001)");
  /* Integers and bools exactly; the thresholds do not apply. */
  t.f32 = t.f64 = t.f16 = 100;
  CHECK_MATCH("3xi32=1,-2,3", "3xi32=1,-2,3", &t);
  CHECK_MISMATCH("3xi32=1,-2,3", "3xi32=1,-1,3", &t,
                 "element [1] (the first that differs): got -2, expected -1");
  CHECK_MISMATCH("2xu64=18446744073709551615,0", "2xu64=18446744073709551614,0", &t,
                 "element [0] (the first that differs): got 18446744073709551615, "
                 "expected 18446744073709551614");
  CHECK_MISMATCH("2xbool=1,0", "2xbool=1,1", &t,
                 "element [1] (the first that differs): got False, expected True");
  /* Types: dtype and shape must both agree. */
  CHECK_MISMATCH("3xf32=1", "3xf64=1", NULL, "expected 3xf64, got 3xf32");
  CHECK_MISMATCH("3xf32=1", "1x3xf32=1", NULL, "expected 1x3xf32, got 3xf32");
  CHECK_MISMATCH("f32=1", "4xf32=1", NULL, "expected 4xf32, got f32");
  CHECK_MATCH("0x3xf32", "0x3xf32", NULL);
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "io_test_tmp";
  mkdir(dir, 0777);
  test_half();
  test_parse();
  test_print();
  test_npy(dir);
  test_npz(dir);
  test_file_values(dir);
  test_compare();
  test_fuzz();
  TEST_MAIN_END();
}
