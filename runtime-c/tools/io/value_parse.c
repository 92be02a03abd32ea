/* Command-line values: "2x3xf32=1,2,3,4,5,6", "f32=3.5", "4xi32=7", "@x.npy". */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_internal.h"
#include "kiln_io.h"
#include "status_internal.h"

kiln_status_t kiln_io_parse_type(const char* text, kiln_dtype_t* dtype,
                                 size_t* rank, int64_t shape[KILN_MAX_RANK]) {
  if (!text || !*text) {
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "empty type: expected SHAPExDTYPE such as 2x3xf32 "
                            "or a dtype alone (f32) for a scalar");
  }
  size_t n = 0;
  const char* p = text;
  for (;;) {
    const char* x = strchr(p, 'x');
    if (!x) break;
    /* A dimension: decimal digits up to the 'x'. */
    if (x == p) {
      return kiln_make_status(KILN_INVALID_ARGUMENT,
                              "type '%s': empty dimension (expected a "
                              "non-negative integer before each 'x')",
                              text);
    }
    int64_t dim = 0;
    for (const char* c = p; c < x; ++c) {
      if (!isdigit((unsigned char)*c)) {
        return kiln_make_status(KILN_INVALID_ARGUMENT,
                                "type '%s': dimension '%.*s' is not a "
                                "non-negative integer",
                                text, (int)(x - p), p);
      }
      int digit = *c - '0';
      if (dim > (INT64_MAX - digit) / 10) {
        return kiln_make_status(KILN_INVALID_ARGUMENT,
                                "type '%s': dimension '%.*s' is too large",
                                text, (int)(x - p), p);
      }
      dim = dim * 10 + digit;
    }
    if (n == KILN_MAX_RANK) {
      return kiln_make_status(KILN_INVALID_ARGUMENT,
                              "type '%s': more than %d dimensions", text,
                              KILN_MAX_RANK);
    }
    shape[n++] = dim;
    p = x + 1;
  }
  if (kiln_dtype_from_name(p, dtype) != 0) {
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "type '%s': unknown dtype '%s' (expected one of "
                            "f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 bool c64 c128)",
                            text, p);
  }
  *rank = n;
  return NULL;
}

/* A complex token as Python writes one: "1.5", "2j", "1-2j", "-1e-3+4.5j", "nan+infj".
 * Returns 0 and the parts, or -1. */
static int kiln_parse_complex(const char* token, double* re, double* im) {
  char* end = NULL;
  double first = strtod(token, &end);
  if (end == token) return -1;
  if (*end == '\0') {
    *re = first;
    *im = 0;
    return 0;
  }
  if (*end == 'j' && end[1] == '\0') {
    *re = 0;
    *im = first;
    return 0;
  }
  if (*end != '+' && *end != '-') return -1;
  const char* rest = end;
  double second = strtod(rest, &end);
  if (end == rest || *end != 'j' || end[1] != '\0') return -1;
  *re = first;
  *im = second;
  return 0;
}

/* Parses one token into element `index` of `dst` (of `dtype`). */
static kiln_status_t kiln_parse_element(const char* token, kiln_dtype_t dtype,
                                        void* dst, size_t index) {
  char* end = NULL;
  switch (dtype) {
    case KILN_DTYPE_C64:
    case KILN_DTYPE_C128: {
      double re, im;
      errno = 0;
      if (kiln_parse_complex(token, &re, &im) != 0) {
        return kiln_make_status(KILN_INVALID_ARGUMENT,
                                "value %zu '%s' is not a complex number (expected a "
                                "%s value such as 1.5, 2j, 1-2j, nan+infj)",
                                index, token, kiln_dtype_name(dtype));
      }
      if (dtype == KILN_DTYPE_C128) {
        ((double*)dst)[2 * index] = re;
        ((double*)dst)[2 * index + 1] = im;
      } else {
        ((float*)dst)[2 * index] = (float)re;
        ((float*)dst)[2 * index + 1] = (float)im;
      }
      return NULL;
    }
    case KILN_DTYPE_F32:
    case KILN_DTYPE_F64:
    case KILN_DTYPE_F16:
    case KILN_DTYPE_BF16: {
      errno = 0;
      double v = strtod(token, &end);
      if (end == token || *end != '\0') {
        return kiln_make_status(KILN_INVALID_ARGUMENT,
                                "value %zu '%s' is not a number (expected a "
                                "%s value such as 1.5, -2, 1e-3, nan, inf)",
                                index, token, kiln_dtype_name(dtype));
      }
      /* ERANGE on underflow is fine (a denormal or zero); overflow gives inf. */
      if (dtype == KILN_DTYPE_F64) {
        ((double*)dst)[index] = v;
      } else {
        float f = (float)v;
        if (dtype == KILN_DTYPE_F32) ((float*)dst)[index] = f;
        else if (dtype == KILN_DTYPE_F16) ((uint16_t*)dst)[index] = kiln_f32_to_f16(f);
        else ((uint16_t*)dst)[index] = kiln_f32_to_bf16(f);
      }
      return NULL;
    }
    case KILN_DTYPE_BOOL: {
      uint8_t v;
      if (!strcmp(token, "1") || !strcmp(token, "true") || !strcmp(token, "True")) {
        v = 1;
      } else if (!strcmp(token, "0") || !strcmp(token, "false") ||
                 !strcmp(token, "False")) {
        v = 0;
      } else {
        return kiln_make_status(KILN_INVALID_ARGUMENT,
                                "value %zu '%s' is not a bool (expected 0, 1, "
                                "true, false, True or False)",
                                index, token);
      }
      ((uint8_t*)dst)[index] = v;
      return NULL;
    }
    case KILN_DTYPE_U64: {
      errno = 0;
      unsigned long long v = strtoull(token, &end, 10); /* takes "-1" as ULLONG_MAX */
      if (end == token || *end != '\0') {
        return kiln_make_status(KILN_INVALID_ARGUMENT,
                                "value %zu '%s' is not an integer (expected a "
                                "decimal u64 value)",
                                index, token);
      }
      if (errno == ERANGE || (token[strspn(token, " \t")] == '-' && v != 0)) {
        return kiln_make_status(KILN_INVALID_ARGUMENT,
                                "value %zu '%s' is out of range for u64 "
                                "(expected 0..%llu)",
                                index, token, (unsigned long long)UINT64_MAX);
      }
      ((uint64_t*)dst)[index] = (uint64_t)v;
      return NULL;
    }
    default: {
      errno = 0;
      long long v = strtoll(token, &end, 10);
      if (end == token || *end != '\0') {
        return kiln_make_status(KILN_INVALID_ARGUMENT,
                                "value %zu '%s' is not an integer (expected a "
                                "decimal %s value)",
                                index, token, kiln_dtype_name(dtype));
      }
      long long lo, hi;
      switch (dtype) {
        case KILN_DTYPE_I8: lo = INT8_MIN; hi = INT8_MAX; break;
        case KILN_DTYPE_I16: lo = INT16_MIN; hi = INT16_MAX; break;
        case KILN_DTYPE_I32: lo = INT32_MIN; hi = INT32_MAX; break;
        case KILN_DTYPE_U8: lo = 0; hi = UINT8_MAX; break;
        case KILN_DTYPE_U16: lo = 0; hi = UINT16_MAX; break;
        case KILN_DTYPE_U32: lo = 0; hi = UINT32_MAX; break;
        default: lo = INT64_MIN; hi = INT64_MAX; break;
      }
      if (errno == ERANGE || v < lo || v > hi) {
        return kiln_make_status(KILN_INVALID_ARGUMENT,
                                "value %zu '%s' is out of range for %s "
                                "(expected %lld..%lld)",
                                index, token, kiln_dtype_name(dtype), lo, hi);
      }
      switch (dtype) {
        case KILN_DTYPE_I8: ((int8_t*)dst)[index] = (int8_t)v; break;
        case KILN_DTYPE_I16: ((int16_t*)dst)[index] = (int16_t)v; break;
        case KILN_DTYPE_I32: ((int32_t*)dst)[index] = (int32_t)v; break;
        case KILN_DTYPE_U8: ((uint8_t*)dst)[index] = (uint8_t)v; break;
        case KILN_DTYPE_U16: ((uint16_t*)dst)[index] = (uint16_t)v; break;
        case KILN_DTYPE_U32: ((uint32_t*)dst)[index] = (uint32_t)v; break;
        default: ((int64_t*)dst)[index] = (int64_t)v; break;
      }
      return NULL;
    }
  }
}

/* Commas, blanks and brackets separate values ("[[1, 2], [3, 4]]" works). */
static int kiln_is_separator(char c) {
  return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '[' ||
         c == ']';
}

kiln_status_t kiln_io_parse_value(const char* text, kiln_buffer_view_t** out) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!text) return kiln_make_status(KILN_INVALID_ARGUMENT, "value text is NULL");
  if (text[0] == '@') {
    if (!text[1]) {
      return kiln_make_status(KILN_INVALID_ARGUMENT,
                              "'@' must be followed by a .npy file path or a .npz archive path");
    }
    return kiln_io_parse_file_value(text + 1, out);
  }

  const char* eq = strchr(text, '=');
  size_t type_len = eq ? (size_t)(eq - text) : strlen(text);
  char* type_text = malloc(type_len + 1);
  if (!type_text) return kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
  memcpy(type_text, text, type_len);
  type_text[type_len] = '\0';
  kiln_dtype_t dtype;
  size_t rank = 0;
  int64_t shape[KILN_MAX_RANK];
  kiln_status_t status = kiln_io_parse_type(type_text, &dtype, &rank, shape);
  free(type_text);
  if (status) return status;

  kiln_buffer_view_t* view = NULL;
  status = kiln_buffer_view_create(dtype, rank, shape, NULL, 0, &view);
  if (status) return status;
  if (!eq) { /* "2x3xf32": zeros */
    *out = view;
    return NULL;
  }

  size_t count = kiln_buffer_view_element_count(view);
  void* data = kiln_buffer_view_mutable_data(view);
  size_t elem = kiln_dtype_size(dtype);
  /* Tokenize a private copy. */
  size_t values_len = strlen(eq + 1);
  char* values = malloc(values_len + 1);
  if (!values) {
    kiln_buffer_view_release(view);
    return kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
  }
  memcpy(values, eq + 1, values_len + 1);

  size_t parsed = 0;
  char* p = values;
  while (*p) {
    while (*p && kiln_is_separator(*p)) p++;
    if (!*p) break;
    char* start = p;
    while (*p && !kiln_is_separator(*p)) p++;
    int at_end = *p == '\0';
    *p = '\0';
    if (parsed < count) {
      status = kiln_parse_element(start, dtype, data, parsed);
      if (status) break;
    }
    parsed++;
    if (!at_end) p++;
  }
  if (!status && parsed == 0 && count != 0) {
    status = kiln_make_status(KILN_INVALID_ARGUMENT,
                              "no values after '=' (expected %zu value%s, or 1 "
                              "to broadcast)",
                              count, count == 1 ? "" : "s");
  } else if (!status && parsed == 1 && count != 1) {
    /* One value broadcasts to every element (nothing to do for 0 elements). */
    for (size_t i = 1; i < count; ++i) {
      memcpy((char*)data + i * elem, data, elem);
    }
  } else if (!status && parsed != count) {
    char type[256];
    kiln_format_type(dtype, rank, shape, type, sizeof(type));
    status = kiln_make_status(KILN_INVALID_ARGUMENT,
                              "wrong number of values for %s: expected %zu "
                              "(or 1 to broadcast), got %zu",
                              type, count, parsed);
  }
  free(values);
  if (status) {
    kiln_buffer_view_release(view);
    return status;
  }
  *out = view;
  return NULL;
}

kiln_status_t kiln_io_bf16_from_bits(kiln_buffer_view_t** view, kiln_dtype_t expected) {
  kiln_buffer_view_t* v = *view;
  if (expected != KILN_DTYPE_BF16 || kiln_buffer_view_dtype(v) != KILN_DTYPE_U16) return NULL;
  kiln_buffer_view_t* bits = NULL;
  kiln_status_t s = kiln_buffer_view_create(KILN_DTYPE_BF16, kiln_buffer_view_rank(v),
                                            kiln_buffer_view_shape(v), kiln_buffer_view_data(v),
                                            kiln_buffer_view_byte_size(v), &bits);
  if (s) return s;
  kiln_buffer_view_release(v);
  *view = bits;
  return NULL;
}
