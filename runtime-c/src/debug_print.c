/* debug.print (format 2.8): templates and numpy-style text of buffers
 * (debug_print.h). Arrays print as numpy 2's str() prints them with its
 * default options (precision 8, floatmode 'maxprec', threshold 1000, edge
 * items 3, line width 75): floats in positional or scientific notation chosen
 * for the whole array, with the shortest digits that read back as the same
 * value, padded to line up; integers right-aligned; bools ' True'/'False';
 * bfloat16 as ml_dtypes prints it (%g); more than 1000 elements summarized
 * with `...`; lines wrapped at 75 columns. */
#include "debug_print.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "status_internal.h"

/* ---- a growing string ---------------------------------------------------- */

/* failed: 0, or why the string stopped growing (the worse reason wins). */
enum { SB_OUT_OF_MEMORY = 1, SB_TOO_LONG = 2 };

typedef struct {
  char* p;
  size_t len, cap;
  size_t max; /* the longest it may grow (0: no limit) */
  int failed;
} sb_t;

static void sb_fail(sb_t* b, int why) {
  if (why > b->failed) b->failed = why;
}

static void sb_reserve(sb_t* b, size_t more) {
  size_t cap;
  char* p;
  if (b->failed || b->len + more + 1 <= b->cap) return;
  if (b->max && (more > b->max || b->len + more + 1 > b->max)) {
    b->failed = SB_TOO_LONG;
    return;
  }
  cap = b->cap ? b->cap : 64;
  while (cap < b->len + more + 1) cap *= 2;
  p = realloc(b->p, cap);
  if (!p) {
    b->failed = SB_OUT_OF_MEMORY;
    return;
  }
  b->p = p;
  b->cap = cap;
}

static void sb_add(sb_t* b, const char* s, size_t n) {
  if (!n) return; /* s may be NULL (a word whose allocation failed, an empty template) */
  sb_reserve(b, n);
  if (b->failed) return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

static void sb_str(sb_t* b, const char* s) { sb_add(b, s, strlen(s)); }

static void sb_spaces(sb_t* b, size_t n) {
  sb_reserve(b, n);
  if (b->failed) return;
  memset(b->p + b->len, ' ', n);
  b->len += n;
  b->p[b->len] = 0;
}

/* ---- templates ----------------------------------------------------------- */

typedef struct {
  char fill, align, sign;
  int zero, width, precision; /* precision -1: none */
  char type;                  /* 0: none */
} spec_t;

/* Parses [[fill]align][sign][0][width][.precision][type] from s[0..n). */
static int parse_spec(const uint8_t* s, size_t n, spec_t* spec) {
  size_t i = 0;
  spec->fill = ' ';
  spec->align = 0;
  spec->sign = '-';
  spec->zero = 0;
  spec->width = 0;
  spec->precision = -1;
  spec->type = 0;
  /* (strchr finds the terminator too: a NUL byte is never an align) */
  if (n >= 2 && s[1] && strchr("<>^=", s[1]) && s[0] >= 0x20 && s[0] < 0x7f && s[0] != '{' &&
      s[0] != '}') {
    spec->fill = (char)s[0];
    spec->align = (char)s[1];
    i = 2;
  } else if (n >= 1 && s[0] && strchr("<>^=", s[0])) {
    spec->align = (char)s[0];
    i = 1;
  }
  if (i < n && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec->sign = (char)s[i++];
  if (i < n && s[i] == '0') {
    spec->zero = 1;
    i++;
  }
  while (i < n && s[i] >= '0' && s[i] <= '9') {
    spec->width = spec->width * 10 + (s[i++] - '0');
    if (spec->width > 1000) return 0;
  }
  if (i < n && s[i] == '.') {
    i++;
    if (i >= n || s[i] < '0' || s[i] > '9') return 0;
    spec->precision = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      spec->precision = spec->precision * 10 + (s[i++] - '0');
      if (spec->precision > 100) return 0;
    }
  }
  if (i < n && s[i] && strchr("fFeEgGd", s[i])) spec->type = (char)s[i++];
  if (i != n) return 0;
  if (spec->precision >= 0 && (spec->type == 0 || spec->type == 'd')) return 0;
  return 1;
}

/* Walks the template: calls back for each literal run and each field. */
typedef int (*literal_fn)(void* user, const uint8_t* s, size_t n);
typedef int (*field_fn)(void* user, uint32_t index, const uint8_t* spec, size_t spec_len);

static int walk(const uint8_t* t, size_t n, void* user, literal_fn lit, field_fn field,
                char* err, size_t err_size) {
  size_t i = 0, start = 0;
  if (!n) return 1; /* an empty constant's data may be NULL */
  while (i < n) {
    if (t[i] == '{' && i + 1 < n && t[i + 1] == '{') {
      if (!lit(user, t + start, i + 1 - start)) return 0;
      i += 2;
      start = i;
    } else if (t[i] == '}' && i + 1 < n && t[i + 1] == '}') {
      if (!lit(user, t + start, i + 1 - start)) return 0;
      i += 2;
      start = i;
    } else if (t[i] == '{') {
      uint64_t index = 0;
      size_t j = i + 1, colon, close;
      if (!lit(user, t + start, i - start)) return 0;
      if (j >= n || t[j] < '0' || t[j] > '9') {
        snprintf(err, err_size, "debug.print template: byte %zu: '{' is not followed by a value "
                 "number", i);
        return 0;
      }
      while (j < n && t[j] >= '0' && t[j] <= '9') {
        if (index <= UINT32_MAX) index = index * 10 + (uint64_t)(t[j] - '0');
        j++;
      }
      if (index > UINT32_MAX) {
        snprintf(err, err_size, "debug.print template: byte %zu: value number %.*s%s is too "
                 "large", i, (int)(j - i - 1 < 20 ? j - i - 1 : 20), (const char*)t + i + 1,
                 j - i - 1 > 20 ? "..." : "");
        return 0;
      }
      colon = j;
      close = j;
      while (close < n && t[close] != '}' && t[close] != '{') close++;
      if (close >= n || t[close] != '}' || (colon < close && t[colon] != ':')) {
        snprintf(err, err_size, "debug.print template: byte %zu: field is not {N} or {N:SPEC}", i);
        return 0;
      }
      if (!field(user, (uint32_t)index, colon < close ? t + colon + 1 : t + close,
                 colon < close ? close - colon - 1 : 0))
        return 0;
      i = close + 1;
      start = i;
    } else if (t[i] == '}') {
      snprintf(err, err_size, "debug.print template: byte %zu: single '}'", i);
      return 0;
    } else {
      i++;
    }
  }
  return lit(user, t + start, n - start);
}

typedef struct {
  uint32_t count;
  char* err;
  size_t err_size;
} check_t;

static int check_literal(void* user, const uint8_t* s, size_t n) {
  (void)user, (void)s, (void)n;
  return 1;
}

static int check_field(void* user, uint32_t index, const uint8_t* spec, size_t spec_len) {
  check_t* c = user;
  spec_t sp;
  if (index >= c->count) {
    snprintf(c->err, c->err_size, "debug.print template: field {%u} names a value, but the "
             "instruction has %u", (unsigned)index, (unsigned)c->count);
    return 0;
  }
  if (spec_len && !parse_spec(spec, spec_len, &sp)) {
    snprintf(c->err, c->err_size, "debug.print template: field {%u} has an unsupported format "
             "spec", (unsigned)index);
    return 0;
  }
  return 1;
}

int kiln_debug_print_check_template(const uint8_t* text, size_t n, uint32_t value_count,
                                    char* err, size_t err_size) {
  check_t c = {value_count, err, err_size};
  return walk(text, n, &c, check_literal, check_field, err, err_size);
}

/* ---- element values ------------------------------------------------------ */

static int is_float(kiln_dtype_t d) {
  return d == KILN_DTYPE_F16 || d == KILN_DTYPE_F32 || d == KILN_DTYPE_F64 ||
         d == KILN_DTYPE_BF16;
}

static double get_float(kiln_dtype_t d, const uint8_t* p) {
  uint16_t h;
  float f;
  double x;
  switch (d) {
    case KILN_DTYPE_F16: memcpy(&h, p, 2); return kiln_half_to_float(h);
    case KILN_DTYPE_BF16: memcpy(&h, p, 2); return kiln_bf16_to_float(h);
    case KILN_DTYPE_F32: memcpy(&f, p, 4); return f;
    default: memcpy(&x, p, 8); return x;
  }
}

static int64_t get_int(kiln_dtype_t d, const uint8_t* p) {
  union { int8_t i8; int16_t i16; int32_t i32; int64_t i64; uint8_t u8; uint16_t u16;
          uint32_t u32; } v;
  memcpy(&v, p, kiln_dtype_size(d));
  switch (d) {
    case KILN_DTYPE_I8: return v.i8;
    case KILN_DTYPE_I16: return v.i16;
    case KILN_DTYPE_I32: return v.i32;
    case KILN_DTYPE_U8: case KILN_DTYPE_BOOL: return v.u8;
    case KILN_DTYPE_U16: return v.u16;
    case KILN_DTYPE_U32: return v.u32;
    default: return v.i64; /* i64; u64 is read with get_u64 */
  }
}

static uint64_t get_u64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* An integer's text: u64 as unsigned, the others signed. */
static int int_text(kiln_dtype_t d, const uint8_t* p, char* out, size_t size) {
  if (d == KILN_DTYPE_U64) return snprintf(out, size, "%llu", (unsigned long long)get_u64(p));
  return snprintf(out, size, "%lld", (long long)get_int(d, p));
}

/* ---- shortest digits ----------------------------------------------------- */

/* Whether the decimal text reads back as x in dtype d. */
static int round_trips(const char* text, double x, kiln_dtype_t d) {
  if (d == KILN_DTYPE_F64) return strtod(text, NULL) == x;
  if (d == KILN_DTYPE_F32) return strtof(text, NULL) == (float)x;
  /* f16: the digits' nearest f32, then f16 (the f32 of a decimal close to an
   * f16 is close enough that the two roundings agree but at exact ties). */
  return kiln_float_to_half(strtof(text, NULL)) == kiln_float_to_half((float)x);
}

/* The shortest decimal digits of finite x (not 0) that read back as x in
 * dtype d (Dragon4's unique digits): digits without sign, dot or trailing
 * zeros, and the decimal exponent of the first. */
static void shortest(double x, kiln_dtype_t d, char* digits, int* ndigits, int* exp10) {
  char buf[64];
  int p, i, n = 0;
  for (p = 0; p < 17; p++) {
    snprintf(buf, sizeof buf, "%.*e", p, x);
    if (round_trips(buf, x, d)) break;
  }
  for (i = 0; buf[i] && buf[i] != 'e'; i++)
    if (buf[i] >= '0' && buf[i] <= '9') digits[n++] = buf[i];
  *exp10 = atoi(buf + i + 1);
  while (n > 1 && digits[n - 1] == '0') n--;
  digits[n] = 0;
  *ndigits = n;
}

/* Positional text of finite x with its unique digits, at most `cutoff`
 * fraction digits (-1: no limit; then rounded as %.Nf rounds the exact
 * value), trailing zeros trimmed: keeping the dot ("1.") or one zero ("1.0").
 * Returns its length. */
static int positional(double x, kiln_dtype_t d, int cutoff, int keep_zero, char* out,
                      size_t size) {
  char digits[40];
  int nd, e, n = 0, i;
  if (x == 0) return snprintf(out, size, signbit(x) ? (keep_zero ? "-0.0" : "-0.")
                                                    : (keep_zero ? "0.0" : "0."));
  shortest(x, d, digits, &nd, &e);
  if (cutoff >= 0 && nd - 1 - e > cutoff) {
    n = snprintf(out, size, "%.*f", cutoff, x);
    while (n > 0 && out[n - 1] == '0') n--;
    if (keep_zero && out[n - 1] == '.') out[n++] = '0';
    out[n] = 0;
    return n;
  }
  if (x < 0) out[n++] = '-';
  if (e < 0) {
    out[n++] = '0';
    out[n++] = '.';
    for (i = 0; i < -e - 1; i++) out[n++] = '0';
    for (i = 0; i < nd; i++) out[n++] = digits[i];
  } else {
    for (i = 0; i <= e; i++) out[n++] = i < nd ? digits[i] : '0';
    out[n++] = '.';
    for (i = e + 1; i < nd; i++) out[n++] = digits[i];
    if (keep_zero && nd <= e + 1) out[n++] = '0';
  }
  out[n] = 0;
  (void)size;
  return n;
}

/* Scientific text of finite x: mantissa with its unique digits (at most
 * `cutoff` fraction digits, -1: none), at least `min_frac` fraction digits
 * (zeros), the dot kept when `keep_dot`, 'e', sign and at least `exp_digits`
 * (>= 2) exponent digits. */
static int scientific(double x, kiln_dtype_t d, int cutoff, int min_frac, int keep_dot,
                      int exp_digits, char* out, size_t size) {
  char digits[40], buf[64];
  int nd, e, n = 0, i, frac;
  if (x == 0) {
    digits[0] = '0';
    digits[1] = 0;
    nd = 1;
    e = 0;
  } else {
    shortest(x, d, digits, &nd, &e);
  }
  if (cutoff >= 0 && nd - 1 > cutoff) {
    char* p;
    snprintf(buf, sizeof buf, "%.*e", cutoff, fabs(x));
    nd = 0;
    for (p = buf; *p && *p != 'e'; p++)
      if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    e = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
  }
  if (signbit(x)) out[n++] = '-';
  out[n++] = digits[0];
  frac = nd - 1 > min_frac ? nd - 1 : min_frac;
  if (frac > 0 || keep_dot) out[n++] = '.';
  for (i = 1; i <= frac; i++) out[n++] = i < nd ? digits[i] : '0';
  n += snprintf(out + n, size - (size_t)n, "e%c%0*d", e < 0 ? '-' : '+',
                exp_digits < 2 ? 2 : exp_digits, e < 0 ? -e : e);
  return n;
}

/* numpy's str of a float scalar (and, for f64, Python's repr of a float):
 * positional with one trailing zero kept for 1e-4 <= |x| < 1e16 (f64), 1e6
 * (f32) or 1e3 (f16), scientific otherwise. */
static int scalar_float_text(double x, kiln_dtype_t d, char* out, size_t size) {
  double a = fabs(x), high = d == KILN_DTYPE_F16 ? 1e3 : d == KILN_DTYPE_F32 ? 1e6 : 1e16;
  if (isnan(x)) return snprintf(out, size, "nan");
  if (isinf(x)) return snprintf(out, size, x < 0 ? "-inf" : "inf");
  if (x == 0 || (a >= 1e-4 && a < high)) return positional(x, d, -1, 1, out, size);
  return scientific(x, d, -1, 0, 0, 2, out, size);
}

/* ---- arrays -------------------------------------------------------------- */

#define EDGE 3
#define THRESHOLD 1000
#define LINE_WIDTH 75

typedef struct {
  const kiln_buffer_view_t* v;
  kiln_dtype_t dtype;
  size_t rank, esize;
  const int64_t* shape;
  const uint8_t* data;
  int summarize;
  /* float format (numpy's FloatingFormat) */
  int exp_format, pad_left, pad_right, precision, exp_size;
  /* int format: width */
  int int_width;
} arr_t;

/* The elements that are shown (all, or the edges of every axis when
 * summarized), in order, without visiting the hidden ones: a summarized
 * array of 10^9 elements costs no more than one of 10^3. */
typedef struct {
  size_t idx[KILN_MAX_RANK];
  size_t flat;
  int more;
} shown_t;

static void shown_first(const arr_t* a, shown_t* w) {
  memset(w->idx, 0, sizeof w->idx);
  w->flat = 0;
  w->more = kiln_buffer_view_element_count(a->v) > 0;
}

static void shown_next(const arr_t* a, shown_t* w) {
  int k;
  size_t stride = 1;
  for (k = (int)a->rank - 1; k >= 0; k--) {
    size_t n = (size_t)a->shape[k];
    w->idx[k]++;
    if (a->summarize && n > 2 * EDGE && w->idx[k] == EDGE) w->idx[k] = n - EDGE;
    if (w->idx[k] < n) break;
    w->idx[k] = 0;
  }
  if (k < 0) {
    w->more = 0;
    return;
  }
  w->flat = 0;
  for (k = (int)a->rank - 1; k >= 0; k--) {
    w->flat += w->idx[k] * stride;
    stride *= (size_t)a->shape[k];
  }
}

static void prepare(arr_t* a) {
  shown_t w;
  size_t i;
  a->exp_format = 0;
  a->pad_left = a->pad_right = 0;
  a->precision = 0;
  a->exp_size = -1;
  a->int_width = 0;
  if (a->dtype == KILN_DTYPE_F16 || a->dtype == KILN_DTYPE_F32 || a->dtype == KILN_DTYPE_F64) {
    double mx = 0, mn = 0;
    int any_nz = 0, any_finite = 0, any_nonfinite = 0, neg_inf = 0;
    char buf[128];
    for (shown_first(a, &w); w.more; shown_next(a, &w)) {
      double x;
      i = w.flat;
      x = get_float(a->dtype, a->data + i * a->esize);
      if (!isfinite(x)) {
        any_nonfinite = 1;
        if (isinf(x) && x < 0) neg_inf = 1;
        continue;
      }
      any_finite = 1;
      if (x != 0) {
        double ax = fabs(x);
        if (!any_nz || ax > mx) mx = ax;
        if (!any_nz || ax < mn) mn = ax;
        any_nz = 1;
      }
    }
    /* numpy 2.3+: the cutoff is 10**min(8, finfo(dtype).precision) */
    if (any_nz && (mx >= (a->dtype == KILN_DTYPE_F16 ? 1e3 : a->dtype == KILN_DTYPE_F32 ? 1e6 : 1e8) ||
                   mn < 1e-4 || mx / mn > 1e3))
      a->exp_format = 1;
    if (any_finite) {
      int frac_max = 0, int_max = 0, exp_max = 0;
      for (shown_first(a, &w); w.more; shown_next(a, &w)) {
        double x;
        int n, dot, e;
        i = w.flat;
        x = get_float(a->dtype, a->data + i * a->esize);
        if (!isfinite(x)) continue;
        if (a->exp_format) {
          n = scientific(x, a->dtype, 8, 0, 1, 2, buf, sizeof buf);
          for (e = 0; buf[e] != 'e'; e++) {}
          for (dot = 0; buf[dot] != '.'; dot++) {}
          if (dot > int_max) int_max = dot;
          if (e - dot - 1 > frac_max) frac_max = e - dot - 1;
          if (n - e - 2 > exp_max) exp_max = n - e - 2;
        } else {
          n = positional(x, a->dtype, 8, 0, buf, sizeof buf);
          for (dot = 0; buf[dot] != '.'; dot++) {}
          if (dot > int_max) int_max = dot;
          if (n - dot - 1 > frac_max) frac_max = n - dot - 1;
        }
      }
      a->pad_left = int_max;
      if (a->exp_format) {
        a->exp_size = exp_max;
        a->precision = frac_max;
        a->pad_right = exp_max + 2 + frac_max;
      } else {
        a->pad_right = frac_max;
      }
    }
    if (any_nonfinite) {
      int offset = a->pad_right + 1;
      if (3 - offset > a->pad_left) a->pad_left = 3 - offset;
      if (3 + neg_inf - offset > a->pad_left) a->pad_left = 3 + neg_inf - offset;
    }
  } else if (a->dtype != KILN_DTYPE_BOOL && a->dtype != KILN_DTYPE_BF16) {
    char buf[32];
    for (shown_first(a, &w); w.more; shown_next(a, &w)) {
      int n;
      i = w.flat;
      n = int_text(a->dtype, a->data + i * a->esize, buf, sizeof buf);
      if (n > a->int_width) a->int_width = n;
    }
  }
}

/* One element of an array (rank >= 1) as numpy's array formatter writes it. */
static void element(const arr_t* a, size_t flat, sb_t* out) {
  const uint8_t* p = a->data + flat * a->esize;
  char buf[160];
  int n;
  if (a->dtype == KILN_DTYPE_BOOL) {
    sb_str(out, *p ? " True" : "False");
  } else if (a->dtype == KILN_DTYPE_BF16) {
    double x = get_float(a->dtype, p);
    n = isnan(x) ? snprintf(buf, sizeof buf, "nan") : snprintf(buf, sizeof buf, "%g", x);
    sb_add(out, buf, (size_t)n);
  } else if (is_float(a->dtype)) {
    double x = get_float(a->dtype, p);
    if (!isfinite(x)) {
      const char* t = isnan(x) ? "nan" : x < 0 ? "-inf" : "inf";
      int width = a->pad_left + a->pad_right + 1 - (int)strlen(t);
      if (width > 0) sb_spaces(out, (size_t)width);
      sb_str(out, t);
    } else if (a->exp_format) {
      int dot;
      /* Every element has at most `precision` unique fraction digits; numpy's
       * Dragon4 (min_digits) prints the exact value's next digits, rounded,
       * where one has fewer: %e's digits. */
      char raw[96];
      int e;
      snprintf(raw, sizeof raw, "%#.*e", a->precision, x);
      for (e = 0; raw[e] != 'e'; e++) {}
      n = snprintf(buf, sizeof buf, "%.*se%c%0*d", e, raw, raw[e + 1],
                   a->exp_size < 2 ? 2 : a->exp_size, abs(atoi(raw + e + 2)));
      for (dot = 0; buf[dot] != '.'; dot++) {}
      if (a->pad_left > dot) sb_spaces(out, (size_t)(a->pad_left - dot));
      sb_add(out, buf, (size_t)n);
    } else {
      int dot;
      n = positional(x, a->dtype, 8, 0, buf, sizeof buf);
      for (dot = 0; buf[dot] != '.'; dot++) {}
      if (a->pad_left > dot) sb_spaces(out, (size_t)(a->pad_left - dot));
      sb_add(out, buf, (size_t)n);
      if (a->pad_right > n - dot - 1) sb_spaces(out, (size_t)(a->pad_right - (n - dot - 1)));
    }
  } else {
    n = int_text(a->dtype, p, buf, sizeof buf);
    if (a->int_width > n) sb_spaces(out, (size_t)(a->int_width - n));
    sb_add(out, buf, (size_t)n);
  }
}

/* numpy's _extendLine: `line` gets `word`, first wrapping into `s` when it would
 * pass `width` (unless the line holds only the indent). */
static void extend_line(sb_t* s, sb_t* line, const char* word, size_t wlen, int width,
                        size_t indent) {
  if (line->len + wlen > (size_t)width && line->len > indent) {
    size_t n = line->len;
    while (n > 0 && line->p[n - 1] == ' ') n--;
    sb_add(s, line->p, n);
    sb_str(s, "\n");
    line->len = 0;
    sb_spaces(line, indent);
  }
  sb_add(line, word, wlen);
}

/* numpy's _formatArray recurser: the array's part at `base` (flat index of
 * its first element) along axes [axis, rank), hanging indent `indent` spaces. */
static void recurse(const arr_t* a, size_t axis, size_t base, size_t stride, size_t indent,
                    int width, sb_t* out) {
  size_t axes_left = a->rank - axis, n = (size_t)a->shape[axis], inner = stride / (n ? n : 1);
  int summary = a->summarize && n > 2 * EDGE;
  size_t leading = summary ? EDGE : 0, trailing = summary ? EDGE : n, i;
  sb_t s = {0};
  s.max = out->max;
  if (axes_left == 1) {
    int elem_width = width - 1;
    sb_t line = {0}, word = {0};
    line.max = word.max = out->max;
    sb_spaces(&line, indent);
    for (i = 0; i < leading && !s.failed && !line.failed; i++) {
      word.len = 0;
      element(a, base + i * inner, &word);
      extend_line(&s, &line, word.p, word.len, elem_width, indent);
      sb_str(&line, " ");
    }
    if (summary) {
      extend_line(&s, &line, "...", 3, elem_width, indent);
      sb_str(&line, " ");
    }
    for (i = trailing; i > 1 && !s.failed && !line.failed; i--) {
      word.len = 0;
      element(a, base + (n - i) * inner, &word);
      extend_line(&s, &line, word.p, word.len, elem_width, indent);
      sb_str(&line, " ");
    }
    word.len = 0;
    element(a, base + (n - 1) * inner, &word);
    extend_line(&s, &line, word.p, word.len, elem_width, indent);
    sb_add(&s, line.p, line.len);
    sb_fail(&s, line.failed);
    sb_fail(&s, word.failed);
    free(line.p);
    free(word.p);
  } else {
    size_t k;
    for (i = 0; i < leading + (summary ? 1 : 0) + trailing && !s.failed; i++) {
      size_t row;
      sb_spaces(&s, indent);
      if (summary && i == leading) {
        sb_str(&s, "...");
      } else {
        row = i < leading ? i : n - (leading + (summary ? 1 : 0) + trailing - i);
        recurse(a, axis + 1, base + row * inner, inner, indent + 1, width - 1, &s);
      }
      if (i + 1 < leading + (summary ? 1 : 0) + trailing)
        for (k = 1; k < axes_left; k++) sb_str(&s, "\n");
    }
  }
  sb_str(out, "[");
  if (s.p && s.len >= indent) sb_add(out, s.p + indent, s.len - indent);
  sb_str(out, "]");
  sb_fail(out, s.failed);
  free(s.p);
}

/* numpy's str() of a buffer. */
static void array_text(const kiln_buffer_view_t* v, sb_t* out) {
  arr_t a;
  char buf[160];
  int n;
  a.v = v;
  a.dtype = kiln_buffer_view_dtype(v);
  a.rank = kiln_buffer_view_rank(v);
  a.shape = kiln_buffer_view_shape(v);
  a.esize = kiln_dtype_size(a.dtype);
  a.data = kiln_buffer_view_data(v);
  if (a.rank == 0) {
    if (a.dtype == KILN_DTYPE_BOOL) {
      sb_str(out, *a.data ? "True" : "False");
      return;
    }
    /* Python's "{}".format of a 0-d array: numpy formats the Python float
     * (or int) it converts to, so repr() of the value as a double: 0.1 in f32
     * prints 0.10000000149011612, as in JAX. */
    n = is_float(a.dtype) ? scalar_float_text(get_float(a.dtype, a.data), KILN_DTYPE_F64, buf, sizeof buf)
                          : int_text(a.dtype, a.data, buf, sizeof buf);
    sb_add(out, buf, (size_t)n);
    return;
  }
  if (kiln_buffer_view_element_count(v) == 0) {
    sb_str(out, "[]");
    return;
  }
  a.summarize = kiln_buffer_view_element_count(v) > THRESHOLD;
  if (out->max) {
    /* Every shown element takes two bytes at least (a digit, a separator):
     * refuse at once what cannot fit, before formatting any of it. */
    size_t shown = 1, k;
    for (k = 0; k < a.rank; k++)
      shown *= a.summarize && (size_t)a.shape[k] > 2 * EDGE ? 2 * EDGE : (size_t)a.shape[k];
    if (shown > out->max / 2) {
      sb_fail(out, SB_TOO_LONG);
      return;
    }
  }
  prepare(&a);
  recurse(&a, 0, 0, kiln_buffer_view_element_count(v), 1, LINE_WIDTH, out);
}

/* Python's format(float-or-int, spec) for a 0-d value. */
static kiln_status_t spec_text(const kiln_buffer_view_t* v, uint32_t index, const spec_t* sp,
                               sb_t* out) {
  kiln_dtype_t d = kiln_buffer_view_dtype(v);
  const uint8_t* p = kiln_buffer_view_data(v);
  char body[512], fmt[32];
  const char* digits = body;
  char sign = 0, align = sp->align, fill = sp->fill;
  int n, pad;
  if (kiln_buffer_view_rank(v) != 0)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "debug.print: field {%u} has a format spec "
                            "but its value has rank %zu (a spec formats 0-d values)",
                            (unsigned)index, kiln_buffer_view_rank(v));
  if (is_float(d) || (sp->type && sp->type != 'd')) {
    double x = is_float(d) ? get_float(d, p)
               : d == KILN_DTYPE_U64 ? (double)get_u64(p) : (double)get_int(d, p);
    if (sp->type == 'd')
      return kiln_make_status(KILN_INVALID_ARGUMENT, "debug.print: field {%u}: format 'd' of "
                              "a float", (unsigned)index);
    if (signbit(x) && !isnan(x)) sign = '-';
    else if (sp->sign == '+') sign = '+';
    else if (sp->sign == ' ') sign = ' ';
    x = fabs(x);
    if (isnan(x) || isinf(x)) {
      int upper = sp->type == 'F' || sp->type == 'E' || sp->type == 'G';
      snprintf(body, sizeof body, "%s", isnan(x) ? (upper ? "NAN" : "nan")
                                                 : (upper ? "INF" : "inf"));
    } else if (sp->type == 0) {
      scalar_float_text(x, KILN_DTYPE_F64, body, sizeof body); /* Python's repr */
    } else {
      snprintf(fmt, sizeof fmt, "%%.%d%c", sp->precision < 0 ? 6 : sp->precision, sp->type);
      snprintf(body, sizeof body, fmt, x);
    }
  } else {
    if (d == KILN_DTYPE_U64) {
      if (sp->sign == '+') sign = '+';
      else if (sp->sign == ' ') sign = ' ';
      snprintf(body, sizeof body, "%llu", (unsigned long long)get_u64(p));
    } else {
      int64_t x = get_int(d, p);
      if (x < 0) sign = '-';
      else if (sp->sign == '+') sign = '+';
      else if (sp->sign == ' ') sign = ' ';
      snprintf(body, sizeof body, "%llu",
               x < 0 ? (unsigned long long)0 - (unsigned long long)x : (unsigned long long)x);
    }
  }
  n = (int)strlen(digits) + (sign ? 1 : 0);
  if (!align) {
    align = sp->zero ? '=' : '>';
    if (sp->zero) fill = '0';
  }
  pad = sp->width > n ? sp->width - n : 0;
  if (align == '>') {
    while (pad-- > 0) sb_add(out, &fill, 1);
    if (sign) sb_add(out, &sign, 1);
    sb_str(out, digits);
  } else if (align == '=') {
    if (sign) sb_add(out, &sign, 1);
    while (pad-- > 0) sb_add(out, &fill, 1);
    sb_str(out, digits);
  } else {
    int left = align == '^' ? pad / 2 : 0, right = pad - left;
    while (left-- > 0) sb_add(out, &fill, 1);
    if (sign) sb_add(out, &sign, 1);
    sb_str(out, digits);
    while (right-- > 0) sb_add(out, &fill, 1);
  }
  return NULL;
}

typedef struct {
  sb_t out;
  const kiln_buffer_view_t* const* values;
  kiln_status_t status;
} fill_t;

static int fill_literal(void* user, const uint8_t* s, size_t n) {
  sb_add(&((fill_t*)user)->out, (const char*)s, n);
  return !((fill_t*)user)->out.failed;
}

static int fill_field(void* user, uint32_t index, const uint8_t* spec, size_t spec_len) {
  fill_t* f = user;
  spec_t sp;
  kiln_dtype_t d = kiln_buffer_view_dtype(f->values[index]);
  /* The types of a function's values are the module's: nothing at load
   * time keeps a complex one out of a print, and its 8 or 16 bytes read as
   * an integer would overrun. */
  if (d == KILN_DTYPE_C64 || d == KILN_DTYPE_C128 || !kiln_dtype_size(d)) {
    f->status = kiln_make_status(KILN_INVALID_ARGUMENT, "debug.print: field {%u}: its value is "
                                 "%s, and complex values are not printed", (unsigned)index,
                                 kiln_dtype_name(d));
    return 0;
  }
  if (!spec_len) {
    array_text(f->values[index], &f->out);
    return !f->out.failed; /* stop at once: the rest cannot be kept */
  }
  parse_spec(spec, spec_len, &sp); /* checked when the module loaded */
  f->status = spec_text(f->values[index], index, &sp, &f->out);
  return f->status == NULL && !f->out.failed;
}

kiln_status_t kiln_debug_print_format(const uint8_t* text, size_t n,
                                      const kiln_buffer_view_t* const* values,
                                      uint32_t value_count, size_t max_line, char** out,
                                      size_t* out_len) {
  fill_t f;
  char err[160] = "";
  int ok;
  memset(&f, 0, sizeof f);
  f.values = values;
  f.out.max = max_line;
  *out = NULL;
  *out_len = 0;
  ok = walk(text, n, &f, fill_literal, fill_field, err, sizeof err);
  if (ok) sb_str(&f.out, "\n");
  if (f.status || f.out.failed || !ok) {
    free(f.out.p);
    if (f.status) return f.status;
    if (f.out.failed == SB_TOO_LONG)
      return kiln_make_status(KILN_OUT_OF_MEMORY, "debug.print: its line would be longer than "
                              "the %zu-byte limit of one printed line", max_line);
    if (f.out.failed)
      return kiln_make_status(KILN_OUT_OF_MEMORY, "debug.print: formatting its text");
    return kiln_make_status(KILN_INTERNAL, "%s", err); /* the loader checked the template */
  }
  (void)value_count;
  *out = f.out.p;
  *out_len = f.out.len;
  return NULL;
}
