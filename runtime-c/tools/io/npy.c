/* numpy .npy files (format versions 1.0, 2.0 and 3.0). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buffer_internal.h"
#include "kiln_io.h"
#include "status_internal.h"

/* ---- whole files ------------------------------------------------------- */

kiln_status_t kiln_io_read_file(const char* path, uint8_t** data, size_t* size) {
  *data = NULL;
  *size = 0;
  FILE* f = fopen(path, "rb");
  if (!f) {
    int err = errno;
    return kiln_make_status(err == ENOENT ? KILN_NOT_FOUND : KILN_IO,
                            "cannot open '%s': %s", path, strerror(err));
  }
  size_t capacity = 1 << 16, used = 0;
  uint8_t* buf = malloc(capacity);
  if (!buf) {
    fclose(f);
    return kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory reading '%s'", path);
  }
  for (;;) {
    if (used == capacity) {
      if (capacity > SIZE_MAX / 2) {
        free(buf);
        fclose(f);
        return kiln_make_status(KILN_OUT_OF_MEMORY, "'%s' is too large", path);
      }
      uint8_t* bigger = realloc(buf, capacity * 2);
      if (!bigger) {
        free(buf);
        fclose(f);
        return kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory reading '%s'",
                                path);
      }
      buf = bigger;
      capacity *= 2;
    }
    size_t n = fread(buf + used, 1, capacity - used, f);
    used += n;
    if (n == 0) break;
  }
  int failed = ferror(f);
  fclose(f);
  if (failed) {
    free(buf);
    return kiln_make_status(KILN_IO, "cannot read '%s' (is it a directory?)", path);
  }
  *data = buf;
  *size = used;
  return NULL;
}

kiln_status_t kiln_io_write_file(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  if (!f) {
    int err = errno;
    return kiln_make_status(err == ENOENT ? KILN_NOT_FOUND : KILN_IO,
                            "cannot create '%s': %s", path, strerror(err));
  }
  size_t written = size ? fwrite(data, 1, size, f) : 0;
  int failed = written != size || ferror(f);
  if (fclose(f) != 0) failed = 1;
  if (failed) {
    remove(path);
    return kiln_make_status(KILN_IO, "cannot write %zu bytes to '%s'", size, path);
  }
  return NULL;
}

/* ---- descr ------------------------------------------------------------- */

static const struct {
  const char* code; /* kind + size, after the byte-order character */
  kiln_dtype_t dtype;
} kiln_npy_descrs[] = {
    {"f4", KILN_DTYPE_F32}, {"f8", KILN_DTYPE_F64}, {"f2", KILN_DTYPE_F16},
    {"i1", KILN_DTYPE_I8},  {"i2", KILN_DTYPE_I16}, {"i4", KILN_DTYPE_I32},
    {"i8", KILN_DTYPE_I64}, {"u1", KILN_DTYPE_U8},  {"b1", KILN_DTYPE_BOOL},
    {"u2", KILN_DTYPE_U16}, {"u4", KILN_DTYPE_U32}, {"u8", KILN_DTYPE_U64},
    {"c8", KILN_DTYPE_C64}, {"c16", KILN_DTYPE_C128},
    {"V2", KILN_DTYPE_BF16}, /* ml_dtypes.bfloat16 saves as void */
};

static const char* kiln_npy_descr_of(kiln_dtype_t dtype) {
  switch (dtype) {
    case KILN_DTYPE_F32: return "<f4";
    case KILN_DTYPE_F64: return "<f8";
    case KILN_DTYPE_F16: return "<f2";
    case KILN_DTYPE_I8: return "|i1";
    case KILN_DTYPE_I16: return "<i2";
    case KILN_DTYPE_I32: return "<i4";
    case KILN_DTYPE_I64: return "<i8";
    case KILN_DTYPE_U8: return "|u1";
    case KILN_DTYPE_BOOL: return "|b1";
    case KILN_DTYPE_BF16: return "<u2"; /* raw bits: numpy has no bfloat16 */
    case KILN_DTYPE_U16: return "<u2";
    case KILN_DTYPE_U32: return "<u4";
    case KILN_DTYPE_U64: return "<u8";
    case KILN_DTYPE_C64: return "<c8";
    case KILN_DTYPE_C128: return "<c16";
  }
  return NULL;
}

/* ---- header parsing: a Python dict literal ------------------------------ */

typedef struct {
  const char* p;
  const char* end;
} kiln_cursor_t;

static void kiln_skip_ws(kiln_cursor_t* c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' ||
                           *c->p == '\r')) {
    c->p++;
  }
}

static int kiln_accept(kiln_cursor_t* c, char ch) {
  kiln_skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return 1;
  }
  return 0;
}

/* A quoted string into buf; 0 on success. */
static int kiln_parse_string(kiln_cursor_t* c, char* buf, size_t buf_size) {
  kiln_skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 1;
  char quote = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != quote) {
    if (n + 1 >= buf_size) return 1;
    buf[n++] = *c->p++;
  }
  if (c->p >= c->end) return 1;
  c->p++;
  buf[n] = '\0';
  return 0;
}

static kiln_status_t kiln_npy_bad_header(const char* what, const char* problem) {
  return kiln_make_status(KILN_INVALID_ARGUMENT,
                          "'%s' is not a valid .npy file: %s", what, problem);
}

kiln_status_t kiln_npy_decode(const uint8_t* data, size_t size, const char* what,
                              kiln_buffer_view_t** out) {
  *out = NULL;
  if (!what) what = "<memory>";
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || memcmp(data, magic, 6) != 0) {
    return kiln_npy_bad_header(what, "missing the \\x93NUMPY magic");
  }
  uint8_t major = data[6];
  size_t header_len, header_start;
  if (major == 1) {
    header_len = (size_t)data[8] | ((size_t)data[9] << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return kiln_npy_bad_header(what, "truncated header");
    header_len = (size_t)data[8] | ((size_t)data[9] << 8) |
                 ((size_t)data[10] << 16) | ((size_t)data[11] << 24);
    header_start = 12;
  } else {
    char problem[96];
    snprintf(problem, sizeof(problem),
             "format version %u.%u is not supported (expected 1.0, 2.0 or 3.0)",
             major, data[7]);
    return kiln_npy_bad_header(what, problem);
  }
  if (header_len > size - header_start) {
    char problem[128];
    snprintf(problem, sizeof(problem),
             "header of %zu bytes runs past the end of the file (%zu bytes)",
             header_len, size);
    return kiln_npy_bad_header(what, problem);
  }

  kiln_cursor_t c = {(const char*)data + header_start,
                     (const char*)data + header_start + header_len};
  char descr[32] = "";
  int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0;
  size_t rank = 0;
  int64_t shape[KILN_MAX_RANK];
  if (!kiln_accept(&c, '{')) return kiln_npy_bad_header(what, "header is not a dict");
  for (;;) {
    if (kiln_accept(&c, '}')) break;
    char key[32];
    if (kiln_parse_string(&c, key, sizeof(key)) || !kiln_accept(&c, ':')) {
      return kiln_npy_bad_header(what, "malformed header dict");
    }
    if (!strcmp(key, "descr")) {
      if (kiln_parse_string(&c, descr, sizeof(descr))) {
        return kiln_npy_bad_header(what,
                                   "'descr' is not a simple dtype string (structured "
                                   "dtypes are not supported)");
      }
      have_descr = 1;
    } else if (!strcmp(key, "fortran_order")) {
      kiln_skip_ws(&c);
      if (c.end - c.p >= 4 && !memcmp(c.p, "True", 4)) {
        fortran = 1;
        c.p += 4;
      } else if (c.end - c.p >= 5 && !memcmp(c.p, "False", 5)) {
        fortran = 0;
        c.p += 5;
      } else {
        return kiln_npy_bad_header(what, "'fortran_order' is not True or False");
      }
      have_order = 1;
    } else if (!strcmp(key, "shape")) {
      if (!kiln_accept(&c, '(')) return kiln_npy_bad_header(what, "'shape' is not a tuple");
      for (;;) {
        if (kiln_accept(&c, ')')) break;
        kiln_skip_ws(&c);
        int64_t dim = 0;
        int digits = 0;
        while (c.p < c.end && *c.p >= '0' && *c.p <= '9') {
          if (dim > (INT64_MAX - 9) / 10) {
            return kiln_npy_bad_header(what, "a 'shape' dimension is too large");
          }
          dim = dim * 10 + (*c.p - '0');
          c.p++;
          digits++;
        }
        if (c.p < c.end && *c.p == 'L') c.p++; /* Python 2 longs */
        if (!digits) return kiln_npy_bad_header(what, "malformed 'shape' tuple");
        if (rank == KILN_MAX_RANK) {
          return kiln_npy_bad_header(what, "'shape' has more than 16 dimensions");
        }
        shape[rank++] = dim;
        if (!kiln_accept(&c, ',')) {
          if (!kiln_accept(&c, ')')) {
            return kiln_npy_bad_header(what, "malformed 'shape' tuple");
          }
          break;
        }
      }
      have_shape = 1;
    } else {
      return kiln_npy_bad_header(what, "unknown key in header dict");
    }
    if (!kiln_accept(&c, ',')) {
      if (!kiln_accept(&c, '}')) return kiln_npy_bad_header(what, "malformed header dict");
      break;
    }
  }
  if (!have_descr || !have_order || !have_shape) {
    return kiln_npy_bad_header(what,
                               "header lacks one of 'descr', 'fortran_order', 'shape'");
  }

  /* descr: byte order + kind + size. */
  char order = descr[0];
  const char* code = descr + 1;
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    order = '=';
    code = descr;
  }
  kiln_dtype_t dtype = KILN_DTYPE_F32;
  int found = 0;
  for (size_t i = 0; i < sizeof(kiln_npy_descrs) / sizeof(kiln_npy_descrs[0]); ++i) {
    if (!strcmp(code, kiln_npy_descrs[i].code)) {
      dtype = kiln_npy_descrs[i].dtype;
      found = 1;
      break;
    }
  }
  if (!found) {
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "'%s': unsupported .npy dtype '%s' (expected one of "
                            "<f4 <f8 <f2 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1 <c8 <c16, or <V2 "
                            "for bfloat16)",
                            what, descr);
  }
  int swap = order == '>' && kiln_dtype_size(dtype) > 1;

  size_t byte_size = 0;
  if (kiln_compute_byte_size(dtype, rank, shape, &byte_size) != 0) {
    return kiln_npy_bad_header(what, "'shape' is too large");
  }
  size_t data_start = header_start + header_len;
  size_t available = size - data_start;
  if (available != byte_size) {
    char type[256];
    kiln_format_type(dtype, rank, shape, type, sizeof(type));
    return kiln_make_status(KILN_DATA_LOSS,
                            "'%s': data size does not match its header: expected "
                            "%zu bytes for %s, got %zu",
                            what, byte_size, type, available);
  }
  kiln_buffer_view_t* view = NULL;
  kiln_status_t status = kiln_buffer_view_allocate(dtype, rank, shape, &view);
  if (status) return kiln_status_annotate(status, "reading '%s'", what);
  uint8_t* dst = kiln_buffer_view_mutable_data(view);
  const uint8_t* src = data + data_start;
  size_t elem = kiln_dtype_size(dtype);
  size_t count = kiln_buffer_view_element_count(view);
  if (!fortran || rank < 2) {
    if (byte_size) memcpy(dst, src, byte_size);
  } else {
    /* Fortran order: the first index varies fastest in the file. */
    size_t index[KILN_MAX_RANK] = {0};
    for (size_t f = 0; f < count; ++f) {
      size_t c_offset = 0;
      for (size_t d = 0; d < rank; ++d) c_offset = c_offset * (size_t)shape[d] + index[d];
      memcpy(dst + c_offset * elem, src + f * elem, elem);
      for (size_t d = 0; d < rank; ++d) {
        if (++index[d] < (size_t)shape[d]) break;
        index[d] = 0;
      }
    }
  }
  if (swap) {
    if (dtype == KILN_DTYPE_C64 || dtype == KILN_DTYPE_C128) { /* each part on its own */
      elem /= 2;
      count *= 2;
    }
    for (size_t i = 0; i < count; ++i) {
      uint8_t* e = dst + i * elem;
      for (size_t a = 0, b = elem - 1; a < b; ++a, --b) {
        uint8_t t = e[a];
        e[a] = e[b];
        e[b] = t;
      }
    }
  }
  if (dtype == KILN_DTYPE_BOOL) {
    for (size_t i = 0; i < count; ++i) dst[i] = dst[i] != 0;
  }
  *out = view;
  return NULL;
}

kiln_status_t kiln_npy_encode(const kiln_buffer_view_t* view, uint8_t** out,
                              size_t* out_size) {
  *out = NULL;
  *out_size = 0;
  const char* descr = kiln_npy_descr_of(kiln_buffer_view_dtype(view));
  if (!descr) return kiln_make_status(KILN_INVALID_ARGUMENT, "unknown dtype");
  size_t rank = kiln_buffer_view_rank(view);
  const int64_t* shape = kiln_buffer_view_shape(view);
  char dict[64 + KILN_MAX_RANK * 24];
  size_t n = (size_t)snprintf(dict, sizeof(dict),
                              "{'descr': '%s', 'fortran_order': False, 'shape': (",
                              descr);
  for (size_t i = 0; i < rank; ++i) {
    n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%s%lld", i ? ", " : "",
                          (long long)shape[i]);
  }
  n += (size_t)snprintf(dict + n, sizeof(dict) - n, "%s), }", rank == 1 ? "," : "");
  /* Pad with spaces and end with '\n' so the data starts 64-byte aligned. */
  size_t total_header = 10 + n + 1;
  total_header = (total_header + 63) / 64 * 64;
  size_t header_len = total_header - 10;
  size_t byte_size = kiln_buffer_view_byte_size(view);
  if (byte_size > SIZE_MAX - total_header) {
    return kiln_make_status(KILN_OUT_OF_MEMORY, "array too large for .npy");
  }
  uint8_t* buf = malloc(total_header + byte_size);
  if (!buf) {
    return kiln_make_status(KILN_OUT_OF_MEMORY,
                            "out of memory encoding %zu bytes as .npy", byte_size);
  }
  static const uint8_t magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  memcpy(buf, magic, 8);
  buf[8] = (uint8_t)(header_len & 0xff);
  buf[9] = (uint8_t)(header_len >> 8);
  memcpy(buf + 10, dict, n);
  memset(buf + 10 + n, ' ', header_len - n - 1);
  buf[total_header - 1] = '\n';
  if (byte_size) memcpy(buf + total_header, kiln_buffer_view_data(view), byte_size);
  *out = buf;
  *out_size = total_header + byte_size;
  return NULL;
}

kiln_status_t kiln_npy_read_file(const char* path, kiln_buffer_view_t** out) {
  *out = NULL;
  uint8_t* data = NULL;
  size_t size = 0;
  kiln_status_t status = kiln_io_read_file(path, &data, &size);
  if (status) return status;
  status = kiln_npy_decode(data, size, path, out);
  free(data);
  return status;
}

kiln_status_t kiln_npy_write_file(const char* path, const kiln_buffer_view_t* view) {
  uint8_t* data = NULL;
  size_t size = 0;
  kiln_status_t status = kiln_npy_encode(view, &data, &size);
  if (status) return status;
  status = kiln_io_write_file(path, data, size);
  free(data);
  return status;
}
