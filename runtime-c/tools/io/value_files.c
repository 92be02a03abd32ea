/* Values that come from .npy and .npz files ("@x.npy", "@x.npz", "@x.npz:NAME")
 * and the comparison of a result with an expected value (kiln-run's
 * --expected_output). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_internal.h"
#include "kiln_io.h"
#include "status_internal.h"

/* Splits "@x.npz:NAME" at the last ".npz:" into the path and the array name
 * (both malloc'd; *name NULL when the text names no array). */
static kiln_status_t kiln_split_file_value(const char* text, char** path, char** name) {
  const char* split = NULL;
  for (const char* p = strstr(text, ".npz:"); p; p = strstr(p + 1, ".npz:")) split = p + 4;
  size_t path_len = split ? (size_t)(split - text) : strlen(text);
  *path = malloc(path_len + 1);
  *name = split ? strdup(split + 1) : NULL;
  if (!*path || (split && !*name)) {
    free(*path);
    free(*name);
    *path = *name = NULL;
    return kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
  }
  memcpy(*path, text, path_len);
  (*path)[path_len] = '\0';
  return NULL;
}

static kiln_status_t kiln_values_one(kiln_npz_t* out, char* name, kiln_buffer_view_t* value) {
  out->entries = calloc(1, sizeof(kiln_npz_entry_t));
  if (!out->entries) {
    free(name);
    kiln_buffer_view_release(value);
    return kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
  }
  out->entries[0].name = name;
  out->entries[0].value = value;
  out->count = 1;
  return NULL;
}

/* "a, b, c" (the first 8 names), for error messages. */
static void kiln_entry_names(const kiln_npz_t* npz, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < npz->count && used + 1 < size; ++i) {
    int n = i < 8 ? snprintf(buf + used, size - used, "%s'%s'", i ? ", " : "", npz->entries[i].name)
                  : snprintf(buf + used, size - used, ", ...");
    if (n < 0) break;
    used += (size_t)n;
    if (i >= 8) break;
  }
}

/* Reads the file of "@PATH" / "@PATH.npz:NAME" into `out`: a .npy file gives its
 * array (no name), a .npz archive every array or the one named. */
static kiln_status_t kiln_read_file_values(const char* text, kiln_npz_t* out) {
  char *path = NULL, *name = NULL;
  kiln_status_t s = kiln_split_file_value(text, &path, &name);
  if (s) return s;
  uint8_t* data = NULL;
  size_t size = 0;
  s = kiln_io_read_file(path, &data, &size);
  int is_zip = !s && size >= 4 && data[0] == 'P' && data[1] == 'K';
  if (!s && !is_zip) {
    if (name) {
      s = kiln_make_status(KILN_INVALID_ARGUMENT,
                           "'%s' is not a .npz archive, so it has no array '%s'", path, name);
    } else {
      kiln_buffer_view_t* value = NULL;
      s = kiln_npy_decode(data, size, path, &value);
      if (!s) s = kiln_values_one(out, NULL, value);
    }
  } else if (!s) {
    kiln_npz_t npz;
    s = kiln_npz_decode(data, size, path, &npz);
    if (!s && !name) {
      *out = npz;
    } else if (!s) {
      size_t found = npz.count;
      for (size_t i = 0; i < npz.count && found == npz.count; ++i) {
        if (!strcmp(npz.entries[i].name, name)) found = i;
      }
      if (found == npz.count) {
        char names[512];
        kiln_entry_names(&npz, names, sizeof names);
        s = kiln_make_status(KILN_NOT_FOUND, "'%s' has no array '%s' (arrays: %s)", path, name,
                             npz.count ? names : "none");
      } else {
        s = kiln_values_one(out, npz.entries[found].name, npz.entries[found].value);
        npz.entries[found].name = NULL;
        npz.entries[found].value = NULL;
      }
      kiln_npz_free(&npz);
    }
  }
  free(data);
  free(path);
  free(name);
  return s;
}

kiln_status_t kiln_io_parse_values(const char* text, kiln_npz_t* out) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "out is NULL");
  out->count = 0;
  out->entries = NULL;
  if (!text) return kiln_make_status(KILN_INVALID_ARGUMENT, "value text is NULL");
  if (text[0] == '@') {
    if (!text[1]) {
      return kiln_make_status(KILN_INVALID_ARGUMENT,
                              "'@' must be followed by a .npy file path or a .npz archive path");
    }
    return kiln_read_file_values(text + 1, out);
  }
  kiln_buffer_view_t* value = NULL;
  kiln_status_t s = kiln_io_parse_value(text, &value);
  if (s) return s;
  return kiln_values_one(out, NULL, value);
}

kiln_status_t kiln_io_parse_file_value(const char* text, kiln_buffer_view_t** out) {
  kiln_npz_t values;
  kiln_status_t s = kiln_read_file_values(text, &values);
  if (s) return s;
  if (values.count != 1) {
    char names[512];
    kiln_entry_names(&values, names, sizeof names);
    s = kiln_make_status(KILN_INVALID_ARGUMENT,
                         "'%s' holds %zu arrays (%s) where one value is expected; name one "
                         "as @%s:NAME",
                         text, values.count, values.count ? names : "none", text);
  } else {
    *out = values.entries[0].value;
    values.entries[0].value = NULL;
  }
  kiln_npz_free(&values);
  return s;
}

/* ---- comparison ------------------------------------------------------- */

void kiln_io_tolerance_initialize(kiln_io_tolerance_t* tolerance) {
  tolerance->f16 = 1e-3; /* iree-run-module's defaults */
  tolerance->f32 = 1e-4;
  tolerance->f64 = 1e-4;
}

/* Part `part` (0 real, 1 imaginary; 0 for real dtypes) of element i as a double. */
static double kiln_float_part(const kiln_buffer_view_t* view, size_t i, int part) {
  const char* data = kiln_buffer_view_data(view);
  switch (kiln_buffer_view_dtype(view)) {
    case KILN_DTYPE_F32: { float v; memcpy(&v, data + 4 * i, 4); return v; }
    case KILN_DTYPE_F64: { double v; memcpy(&v, data + 8 * i, 8); return v; }
    case KILN_DTYPE_F16: { uint16_t v; memcpy(&v, data + 2 * i, 2); return kiln_f16_to_f32(v); }
    case KILN_DTYPE_BF16: { uint16_t v; memcpy(&v, data + 2 * i, 2); return kiln_bf16_to_f32(v); }
    case KILN_DTYPE_C64: { float v; memcpy(&v, data + 8 * i + 4 * part, 4); return v; }
    case KILN_DTYPE_C128: { double v; memcpy(&v, data + 16 * i + 8 * part, 8); return v; }
    default: return 0;
  }
}

/* Whether two floats match: NaN matches NaN, an infinity the same infinity,
 * finite values within `threshold` (absolute). */
static int kiln_floats_match(double got, double expected, double threshold) {
  if (isnan(got) || isnan(expected)) return isnan(got) && isnan(expected);
  if (isinf(got) || isinf(expected)) return got == expected;
  return fabs(got - expected) <= threshold;
}

/* "[1, 2]" for a flat index of a view of this shape; "[]" for a 0-d view. */
static void kiln_format_index(const kiln_buffer_view_t* view, size_t flat, char* buf, size_t size) {
  size_t rank = kiln_buffer_view_rank(view);
  const int64_t* shape = kiln_buffer_view_shape(view);
  size_t index[KILN_MAX_RANK];
  for (size_t d = rank; d-- > 0;) {
    index[d] = flat % (size_t)shape[d];
    flat /= (size_t)shape[d];
  }
  size_t used = (size_t)snprintf(buf, size, "[");
  for (size_t d = 0; d < rank && used < size; ++d) {
    int n = snprintf(buf + used, size - used, "%s%zu", d ? ", " : "", index[d]);
    if (n < 0) break;
    used += (size_t)n;
  }
  if (used < size) snprintf(buf + used, size - used, "]");
}

kiln_status_t kiln_io_compare(const kiln_buffer_view_t* got, const kiln_buffer_view_t* expected,
                              const kiln_io_tolerance_t* tolerance) {
  kiln_io_tolerance_t defaults;
  if (!tolerance) {
    kiln_io_tolerance_initialize(&defaults);
    tolerance = &defaults;
  }
  kiln_dtype_t dtype = kiln_buffer_view_dtype(got);
  if (!kiln_buffer_view_has_type(expected, dtype, kiln_buffer_view_rank(got),
                                 kiln_buffer_view_shape(got))) {
    char got_type[512], expected_type[512];
    kiln_format_type(dtype, kiln_buffer_view_rank(got), kiln_buffer_view_shape(got), got_type,
                     sizeof got_type);
    kiln_format_type(kiln_buffer_view_dtype(expected), kiln_buffer_view_rank(expected),
                     kiln_buffer_view_shape(expected), expected_type, sizeof expected_type);
    return kiln_make_status(KILN_FAILED_PRECONDITION, "expected %s, got %s", expected_type,
                            got_type);
  }
  double threshold = -1; /* exact comparison */
  const char* threshold_name = NULL;
  switch (dtype) {
    case KILN_DTYPE_F16: case KILN_DTYPE_BF16:
      threshold = tolerance->f16, threshold_name = "f16"; break;
    case KILN_DTYPE_F32: case KILN_DTYPE_C64:
      threshold = tolerance->f32, threshold_name = "f32"; break;
    case KILN_DTYPE_F64: case KILN_DTYPE_C128:
      threshold = tolerance->f64, threshold_name = "f64"; break;
    default: break;
  }
  int parts = dtype == KILN_DTYPE_C64 || dtype == KILN_DTYPE_C128 ? 2 : 1;
  size_t elem = kiln_dtype_size(dtype);
  const char* a = kiln_buffer_view_data(got);
  const char* b = kiln_buffer_view_data(expected);
  size_t count = kiln_buffer_view_element_count(got);
  for (size_t i = 0; i < count; ++i) {
    int match = 1;
    double difference = 0;
    if (threshold < 0) {
      match = !memcmp(a + i * elem, b + i * elem, elem);
    } else {
      for (int part = 0; part < parts; ++part) {
        double x = kiln_float_part(got, i, part), y = kiln_float_part(expected, i, part);
        if (!kiln_floats_match(x, y, threshold)) {
          match = 0;
          if (fabs(x - y) > difference || isnan(fabs(x - y))) difference = fabs(x - y);
        }
      }
    }
    if (match) continue;
    char index[256], got_text[96], expected_text[96];
    kiln_format_index(got, i, index, sizeof index);
    kiln_io_format_element(got, i, got_text, sizeof got_text);
    kiln_io_format_element(expected, i, expected_text, sizeof expected_text);
    if (threshold < 0 || !isfinite(difference)) {
      return kiln_make_status(KILN_FAILED_PRECONDITION,
                              "element %s (the first that differs): got %s, expected %s", index,
                              got_text, expected_text);
    }
    return kiln_make_status(KILN_FAILED_PRECONDITION,
                            "element %s (the first that differs): got %s, expected %s "
                            "(difference %.3g > the %s threshold %g)",
                            index, got_text, expected_text, difference, threshold_name, threshold);
  }
  return NULL;
}
