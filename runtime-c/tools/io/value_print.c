/* numpy-like printing of buffer views. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_io.h"

/* Shortest %g precision that reads back to the same value. */
static void kiln_format_float(double v, int max_precision, int kind, char* buf,
                              size_t buf_size) {
  if (isnan(v)) {
    snprintf(buf, buf_size, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, buf_size, v < 0 ? "-inf" : "inf");
    return;
  }
  int p = 1;
  for (; p <= max_precision; ++p) {
    snprintf(buf, buf_size, "%.*g", p, v);
    double back = strtod(buf, NULL);
    int same;
    switch (kind) {
      case 0: same = back == v; break;                             /* f64 */
      case 1: same = (float)back == (float)v; break;               /* f32 */
      case 2: same = kiln_f32_to_f16((float)back) == kiln_f32_to_f16((float)v); break;
      default: same = kiln_f32_to_bf16((float)back) == kiln_f32_to_bf16((float)v); break;
    }
    if (same) break;
  }
  if (p > max_precision) p = max_precision;
  /* Positional notation unless the magnitude is extreme (as numpy does). */
  if (v != 0) {
    char sci[64];
    snprintf(sci, sizeof(sci), "%.*e", p - 1, v);
    const char* e = strchr(sci, 'e');
    int exponent = e ? atoi(e + 1) : 0;
    if (exponent >= -4 && exponent < 16) {
      int decimals = p - 1 - exponent;
      snprintf(buf, buf_size, "%.*f", decimals > 0 ? decimals : 0, v);
    }
  }
  /* numpy writes a whole float scalar as "1.0" */
  if (!strpbrk(buf, ".eEn")) {
    size_t len = strlen(buf);
    if (len + 2 < buf_size) {
      buf[len] = '.';
      buf[len + 1] = '0';
      buf[len + 2] = '\0';
    }
  }
}

/* One part of a complex number as Python's repr writes it: shortest round trip,
 * no ".0" on whole numbers ("1", "-2.5", "1e+20", "nan", "inf"). */
static void kiln_format_complex_part(double v, int f32, char* buf, size_t buf_size) {
  if (isnan(v)) {
    snprintf(buf, buf_size, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, buf_size, v < 0 ? "-inf" : "inf");
    return;
  }
  for (int p = 1; p <= 17; ++p) {
    snprintf(buf, buf_size, "%.*g", p, v);
    double back = strtod(buf, NULL);
    if (f32 ? (float)back == (float)v : back == v) return;
  }
}

/* A complex element as numpy's str of a complex scalar: "(1+2j)", "(-0.5-1j)", "1j"
 * for a zero real part (+0 only), "(nan+infj)". */
static void kiln_format_complex(double re, double im, int f32, char* buf, size_t buf_size) {
  char a[40], b[40];
  kiln_format_complex_part(im, f32, b, sizeof b);
  if (re == 0 && !signbit(re)) {
    snprintf(buf, buf_size, "%sj", b);
    return;
  }
  kiln_format_complex_part(re, f32, a, sizeof a);
  int sign = b[0] != '-';
  snprintf(buf, buf_size, "(%s%s%sj)", a, sign ? "+" : "", b);
}

void kiln_io_format_element(const kiln_buffer_view_t* view, size_t i, char* buf,
                            size_t buf_size) {
  const void* data = kiln_buffer_view_data(view);
  switch (kiln_buffer_view_dtype(view)) {
    case KILN_DTYPE_F32: {
      float v;
      memcpy(&v, (const char*)data + 4 * i, 4);
      kiln_format_float(v, 9, 1, buf, buf_size);
      break;
    }
    case KILN_DTYPE_F64: {
      double v;
      memcpy(&v, (const char*)data + 8 * i, 8);
      kiln_format_float(v, 17, 0, buf, buf_size);
      break;
    }
    case KILN_DTYPE_F16: {
      uint16_t v;
      memcpy(&v, (const char*)data + 2 * i, 2);
      kiln_format_float(kiln_f16_to_f32(v), 5, 2, buf, buf_size);
      break;
    }
    case KILN_DTYPE_BF16: {
      uint16_t v;
      memcpy(&v, (const char*)data + 2 * i, 2);
      kiln_format_float(kiln_bf16_to_f32(v), 4, 3, buf, buf_size);
      break;
    }
    case KILN_DTYPE_I8:
      snprintf(buf, buf_size, "%d", ((const int8_t*)data)[i]);
      break;
    case KILN_DTYPE_I16: {
      int16_t v;
      memcpy(&v, (const char*)data + 2 * i, 2);
      snprintf(buf, buf_size, "%d", v);
      break;
    }
    case KILN_DTYPE_I32: {
      int32_t v;
      memcpy(&v, (const char*)data + 4 * i, 4);
      snprintf(buf, buf_size, "%d", (int)v);
      break;
    }
    case KILN_DTYPE_I64: {
      int64_t v;
      memcpy(&v, (const char*)data + 8 * i, 8);
      snprintf(buf, buf_size, "%lld", (long long)v);
      break;
    }
    case KILN_DTYPE_U8:
      snprintf(buf, buf_size, "%u", ((const uint8_t*)data)[i]);
      break;
    case KILN_DTYPE_U16: {
      uint16_t v;
      memcpy(&v, (const char*)data + 2 * i, 2);
      snprintf(buf, buf_size, "%u", (unsigned)v);
      break;
    }
    case KILN_DTYPE_U32: {
      uint32_t v;
      memcpy(&v, (const char*)data + 4 * i, 4);
      snprintf(buf, buf_size, "%lu", (unsigned long)v);
      break;
    }
    case KILN_DTYPE_U64: {
      uint64_t v;
      memcpy(&v, (const char*)data + 8 * i, 8);
      snprintf(buf, buf_size, "%llu", (unsigned long long)v);
      break;
    }
    case KILN_DTYPE_BOOL:
      snprintf(buf, buf_size, "%s", ((const uint8_t*)data)[i] ? "True" : "False");
      break;
    case KILN_DTYPE_C64: {
      float v[2];
      memcpy(v, (const char*)data + 8 * i, 8);
      kiln_format_complex(v[0], v[1], 1, buf, buf_size);
      break;
    }
    case KILN_DTYPE_C128: {
      double v[2];
      memcpy(v, (const char*)data + 16 * i, 16);
      kiln_format_complex(v[0], v[1], 0, buf, buf_size);
      break;
    }
    default:
      snprintf(buf, buf_size, "?");
      break;
  }
}

#define KILN_SUMMARY_THRESHOLD 1000
#define KILN_EDGE_ITEMS 3
#define KILN_LINE_WIDTH 75 /* numpy's default linewidth */
#define KILN_PRECISION 8   /* numpy's default precision (fraction digits) */

/* ---- floats inside arrays, as numpy's FloatingFormat ('maxprec') -------- */

static int kiln_is_float(kiln_dtype_t d) {
  return d == KILN_DTYPE_F32 || d == KILN_DTYPE_F64 || d == KILN_DTYPE_F16 ||
         d == KILN_DTYPE_BF16;
}

static int kiln_is_complex(kiln_dtype_t d) {
  return d == KILN_DTYPE_C64 || d == KILN_DTYPE_C128;
}

/* The dtype of a complex dtype's parts; any other dtype itself. */
static kiln_dtype_t kiln_part_dtype(kiln_dtype_t d) {
  return d == KILN_DTYPE_C64 ? KILN_DTYPE_F32 : d == KILN_DTYPE_C128 ? KILN_DTYPE_F64 : d;
}

/* Element i of a float view, or part `part` (0 real, 1 imaginary) of element i of a complex one. */
static double kiln_element_part(const kiln_buffer_view_t* view, size_t i, int part) {
  const char* data = kiln_buffer_view_data(view);
  switch (kiln_buffer_view_dtype(view)) {
    case KILN_DTYPE_C64: { float v; memcpy(&v, data + 8 * i + 4 * part, 4); return v; }
    case KILN_DTYPE_C128: { double v; memcpy(&v, data + 16 * i + 8 * part, 8); return v; }
    default: break;
  }
  switch (kiln_buffer_view_dtype(view)) {
    case KILN_DTYPE_F32: { float v; memcpy(&v, data + 4 * i, 4); return v; }
    case KILN_DTYPE_F64: { double v; memcpy(&v, data + 8 * i, 8); return v; }
    case KILN_DTYPE_F16: { uint16_t v; memcpy(&v, data + 2 * i, 2); return kiln_f16_to_f32(v); }
    case KILN_DTYPE_BF16: { uint16_t v; memcpy(&v, data + 2 * i, 2); return kiln_bf16_to_f32(v); }
    default: return 0;
  }
}

static int kiln_same_value(double a, double b, kiln_dtype_t d) {
  switch (d) {
    case KILN_DTYPE_F64: return a == b;
    case KILN_DTYPE_F32: return (float)a == (float)b;
    case KILN_DTYPE_F16: return kiln_f32_to_f16((float)a) == kiln_f32_to_f16((float)b);
    default: return kiln_f32_to_bf16((float)a) == kiln_f32_to_bf16((float)b);
  }
}

/* Fewest significant digits that read back as the same value. */
static int kiln_unique_digits(double v, kiln_dtype_t d) {
  char buf[64];
  for (int p = 1; p < 17; ++p) {
    snprintf(buf, sizeof(buf), "%.*e", p - 1, v);
    if (kiln_same_value(strtod(buf, NULL), v, d)) return p;
  }
  return 17;
}

static int kiln_decimal_exponent(double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.16e", v);
  const char* e = strchr(buf, 'e');
  return e ? atoi(e + 1) : 0;
}

/* Positional: unique digits, at most KILN_PRECISION after the point,
 * trailing zeros trimmed down to the point ("1.", "0.25"). */
static void kiln_format_positional(double v, kiln_dtype_t d, char* buf, size_t size) {
  int digits = v == 0 ? 1 : kiln_unique_digits(v, d);
  int fraction = v == 0 ? 0 : digits - 1 - kiln_decimal_exponent(v);
  if (fraction < 0) fraction = 0;
  if (fraction > KILN_PRECISION) fraction = KILN_PRECISION;
  snprintf(buf, size, "%.*f", fraction, v);
  if (strchr(buf, '.')) {
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == '0') buf[--n] = '\0';
  } else {
    size_t n = strlen(buf);
    if (n + 1 < size) { buf[n] = '.'; buf[n + 1] = '\0'; }
  }
}

/* Scientific with `fraction` mantissa digits and at least `exp_digits`
 * exponent digits ("1.5e-05", "1.e+100"). */
static void kiln_format_scientific(double v, int fraction, int exp_digits, char* buf,
                                   size_t size) {
  char tmp[64];
  snprintf(tmp, sizeof(tmp), "%.*e", fraction, v);
  char* e = strchr(tmp, 'e');
  if (!e) {
    snprintf(buf, size, "%s", tmp);
    return;
  }
  *e = '\0';
  char sign = e[1];
  int exponent = abs(atoi(e + 1));
  snprintf(buf, size, "%s%se%c%0*d", tmp, fraction == 0 ? "." : "", sign, exp_digits, exponent);
}

typedef struct {
  int exp_format;  /* scientific for the whole array */
  int fraction;    /* scientific: mantissa digits after the point */
  int exp_digits;  /* scientific: exponent digits */
  int pad_left;    /* widest part before the point (sign included) */
  int pad_right;   /* widest part after the point (positional) */
  double min_abs, max_abs;
  int any_nonzero;
} kiln_float_format_t;

/* ---- the array printer -------------------------------------------------- */

typedef struct {
  FILE* out;
  const kiln_buffer_view_t* view;
  kiln_dtype_t dtype;
  const int64_t* shape;
  size_t rank;
  int summarize;
  int pass;        /* 0: float range, 1: widths, 2: output */
  kiln_float_format_t ff;
  int width;       /* widest non-float element (or nan/inf) */
  kiln_float_format_t ff_im; /* complex: the imaginary parts' format (sign '+') */
  int width_im;              /* complex: widest imaginary nan/inf */
  char* line;      /* the current output line, flushed (right-trimmed) at '\n' */
  size_t line_len, line_cap;
} kiln_printer_t;

static void kiln_flush_line(kiln_printer_t* pr, int newline) {
  size_t n = pr->line_len;
  if (newline) {
    while (n > 0 && pr->line[n - 1] == ' ') n--; /* as numpy: no trailing blanks */
  }
  if (n) fwrite(pr->line, 1, n, pr->out);
  if (newline) fputc('\n', pr->out);
  pr->line_len = 0;
}

static void kiln_emit(kiln_printer_t* pr, const char* text) {
  for (const char* p = text; *p; ++p) {
    if (*p == '\n') {
      kiln_flush_line(pr, 1);
      continue;
    }
    if (pr->line_len + 1 >= pr->line_cap) {
      size_t cap = pr->line_cap ? pr->line_cap * 2 : 256;
      char* bigger = realloc(pr->line, cap);
      if (!bigger) { /* out of memory: write through */
        kiln_flush_line(pr, 0);
        fputc(*p, pr->out);
        continue;
      }
      pr->line = bigger;
      pr->line_cap = cap;
    }
    pr->line[pr->line_len++] = *p;
  }
}

static void kiln_emit_repeat(kiln_printer_t* pr, char c, size_t n) {
  char one[2] = {c, '\0'};
  for (size_t i = 0; i < n; ++i) kiln_emit(pr, one);
}

static void kiln_visit_part(kiln_printer_t* pr, kiln_float_format_t* ff, int* width, double v,
                            int plus, char* cell, size_t size);

/* Visits element `index`: measures it (passes 0 and 1) or formats it into
 * `cell`, padded to the common width (pass 2). */
static void kiln_visit_element(kiln_printer_t* pr, size_t index, char* cell, size_t size) {
  char buf[96];
  if (!kiln_is_float(pr->dtype) && !kiln_is_complex(pr->dtype)) {
    kiln_io_format_element(pr->view, index, buf, sizeof(buf));
    int len = (int)strlen(buf);
    if (pr->pass == 1 && len > pr->width) pr->width = len;
    if (pr->pass == 2) snprintf(cell, size, "%*s", pr->width, buf);
    return;
  }
  if (kiln_is_complex(pr->dtype)) {
    /* numpy's ComplexFloatingFormat: the real parts formatted together, the imaginary parts
     * together with a '+' sign, then 'j' before the imaginary part's padding. */
    char re[96], im[96];
    kiln_visit_part(pr, &pr->ff, &pr->width, kiln_element_part(pr->view, index, 0), 0, re, sizeof re);
    kiln_visit_part(pr, &pr->ff_im, &pr->width_im, kiln_element_part(pr->view, index, 1), 1, im,
                    sizeof im);
    if (pr->pass == 2) {
      size_t n = strlen(im);
      while (n > 0 && im[n - 1] == ' ') n--;
      if (snprintf(cell, size, "%s%.*sj%s", re, (int)n, im, im + n) >= (int)size) cell[size - 1] = '\0';
    }
    return;
  }
  kiln_visit_part(pr, &pr->ff, &pr->width, kiln_element_part(pr->view, index, 0), 0, cell, size);
}

/* One float value (an element, or a part of a complex element) under the format `ff` of its
 * group and the widest nan/inf `*width`; `plus` writes a '+' before positive values (numpy's
 * sign='+', the imaginary parts). */
static void kiln_visit_part(kiln_printer_t* pr, kiln_float_format_t* ff, int* width, double v,
                            int plus, char* cell, size_t size) {
  char buf[96];
  kiln_dtype_t dtype = kiln_part_dtype(pr->dtype);
  if (!isfinite(v)) {
    snprintf(buf, sizeof(buf), "%s%s", plus && !(v < 0) ? "+" : "",
             isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
    int len = (int)strlen(buf);
    if (pr->pass == 1 && len > (*width)) (*width) = len;
    if (pr->pass == 2) {
      int total = ff->exp_format
                      ? ff->pad_left + 1 + ff->fraction + 2 + ff->exp_digits
                      : ff->pad_left + 1 + ff->pad_right;
      if (!ff->any_nonzero && !ff->pad_left) total = 0; /* only nan/inf */
      snprintf(cell, size, "%*s", total > (*width) ? total : (*width), buf);
    }
    return;
  }
  if (pr->pass == 0) {
    double a = fabs(v);
    if (a != 0) {
      if (!ff->any_nonzero || a < ff->min_abs) ff->min_abs = a;
      if (!ff->any_nonzero || a > ff->max_abs) ff->max_abs = a;
      ff->any_nonzero = 1;
    }
    return;
  }
  if (ff->exp_format) {
    if (pr->pass == 1) {
      int fraction = (v == 0 ? 1 : kiln_unique_digits(v, dtype)) - 1;
      if (fraction > KILN_PRECISION) fraction = KILN_PRECISION;
      if (fraction > ff->fraction) ff->fraction = fraction;
      int e = abs(kiln_decimal_exponent(v));
      int exp_digits = e >= 100 ? 3 : 2;
      if (exp_digits > ff->exp_digits) ff->exp_digits = exp_digits;
      int left = v < 0 || plus ? 2 : 1;
      if (left > ff->pad_left) ff->pad_left = left;
      return;
    }
    kiln_format_scientific(v, ff->fraction, ff->exp_digits, buf + 1, sizeof(buf) - 1);
    buf[0] = '+';
    if (!(plus && !signbit(v))) memmove(buf, buf + 1, strlen(buf + 1) + 1);
    int total = ff->pad_left + 1 + ff->fraction + 2 + ff->exp_digits;
    snprintf(cell, size, "%*s", total > (*width) ? total : (*width), buf);
    return;
  }
  buf[0] = '+';
  kiln_format_positional(v, dtype, buf + 1, sizeof(buf) - 1);
  if (!(plus && !signbit(v))) memmove(buf, buf + 1, strlen(buf + 1) + 1);
  const char* dot = strchr(buf, '.');
  int left = dot ? (int)(dot - buf) : (int)strlen(buf);
  int right = dot ? (int)strlen(dot + 1) : 0;
  if (pr->pass == 1) {
    if (left > ff->pad_left) ff->pad_left = left;
    if (right > ff->pad_right) ff->pad_right = right;
    return;
  }
  int total = ff->pad_left + 1 + ff->pad_right;
  int extra = (*width) > total ? (*width) - total : 0; /* room for nan/inf */
  snprintf(cell, size, "%*s%*s%s%*s", extra, "", ff->pad_left - left, "", buf,
           ff->pad_right - right, "");
}

/* Visits the printed elements of dimension `dim` starting at flat `offset`. */
static void kiln_print_dim(kiln_printer_t* pr, size_t dim, size_t offset) {
  size_t stride = 1;
  for (size_t d = dim + 1; d < pr->rank; ++d) stride *= (size_t)pr->shape[d];
  size_t n = (size_t)pr->shape[dim];
  int cut = pr->summarize && n > 2 * KILN_EDGE_ITEMS;
  int innermost = dim + 1 == pr->rank;
  int out = pr->pass == 2;
  /* numpy wraps a row when it would pass the line width, less one column
   * per closing bracket, and indents the continuation under the row. */
  int limit = KILN_LINE_WIDTH - (int)pr->rank;
  if (out) kiln_emit(pr, "[");
  for (size_t i = 0; i < n; ++i) {
    if (cut && i == KILN_EDGE_ITEMS) {
      if (out) {
        if (innermost) {
          if ((int)pr->line_len + 4 > limit) {
            kiln_emit(pr, "\n");
            kiln_emit_repeat(pr, ' ', pr->rank);
            kiln_emit(pr, "...");
          } else {
            kiln_emit(pr, " ...");
          }
        } else {
          kiln_emit_repeat(pr, '\n', pr->rank - dim - 1);
          kiln_emit_repeat(pr, ' ', dim + 1);
          kiln_emit(pr, "...");
        }
      }
      i = n - KILN_EDGE_ITEMS;
    }
    if (innermost) {
      char cell[192];
      kiln_visit_element(pr, offset + i, cell, sizeof(cell));
      if (!out) continue;
      if (i > 0) {
        if ((int)pr->line_len + 1 + (int)strlen(cell) > limit) {
          kiln_emit(pr, "\n");
          kiln_emit_repeat(pr, ' ', pr->rank);
        } else {
          kiln_emit(pr, " ");
        }
      }
      kiln_emit(pr, cell);
    } else {
      if (i > 0 && out) {
        /* One newline per remaining dimension, then align under '['. */
        kiln_emit_repeat(pr, '\n', pr->rank - dim - 1);
        kiln_emit_repeat(pr, ' ', dim + 1);
      }
      kiln_print_dim(pr, dim + 1, offset + i * stride);
    }
  }
  if (out) kiln_emit(pr, "]");
}

void kiln_io_print_values(FILE* out, const kiln_buffer_view_t* view) {
  size_t rank = kiln_buffer_view_rank(view);
  if (rank == 0) {
    char buf[64];
    kiln_io_format_element(view, 0, buf, sizeof(buf));
    fprintf(out, "%s\n", buf);
    return;
  }
  const int64_t* shape = kiln_buffer_view_shape(view);
  if (kiln_buffer_view_element_count(view) == 0) {
    /* numpy: "[]" for any empty array. */
    fputs("[]\n", out);
    return;
  }
  kiln_printer_t pr;
  memset(&pr, 0, sizeof(pr));
  pr.out = out;
  pr.view = view;
  pr.dtype = kiln_buffer_view_dtype(view);
  pr.shape = shape;
  pr.rank = rank;
  pr.summarize = kiln_buffer_view_element_count(view) > KILN_SUMMARY_THRESHOLD;
  /* Pass 0: the range of the printed floats decides positional or
   * scientific notation for the whole array, as numpy decides it. */
  if (kiln_is_float(pr.dtype) || kiln_is_complex(pr.dtype)) {
    kiln_print_dim(&pr, 0, 0);
    kiln_float_format_t* formats[2] = {&pr.ff, &pr.ff_im}; /* complex: each part on its own */
    for (int k = 0; k < 2; ++k) {
      kiln_float_format_t* f = formats[k];
      if (f->any_nonzero) {
        f->exp_format = f->max_abs >= 1e8 || f->min_abs < 1e-4 || f->max_abs / f->min_abs > 1e3;
      }
    }
  }
  pr.pass = 1;
  kiln_print_dim(&pr, 0, 0);
  pr.pass = 2;
  kiln_print_dim(&pr, 0, 0);
  kiln_flush_line(&pr, 1);
  free(pr.line);
}
