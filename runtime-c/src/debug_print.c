/* debug.print (formats 2.8, 2.9): templates and numpy-style text of buffers
 * (debug_print.h). Arrays print as numpy 2's str() and repr() print them,
 * with its default print options (precision 8, floatmode 'maxprec',
 * threshold 1000, edge items 3, line width 75) or those of the template's
 * {!options ...} block (2.9): floats in positional or scientific notation
 * chosen for the whole array (numpy's FloatingFormat with Dragon4's shortest
 * digits), padded to line up; integers right-aligned (IntegerFormat); bools
 * ' True'/'False'; complex values as a real and a signed imaginary
 * FloatingFormat; bfloat16 as ml_dtypes prints it (%g); summarized with
 * `...`; lines wrapped at the line width. */
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

/* numpy's print options (format 2.9: a template's leading `{!options ...}`
 * block; numpy's defaults without one). */
enum { FM_MAXPREC, FM_UNIQUE, FM_FIXED, FM_MAXPREC_EQUAL };

typedef struct {
  int precision;      /* 0..100 */
  int floatmode;      /* FM_* */
  int suppress;       /* 0 or 1 */
  char sign;          /* '-', '+' or ' ' */
  uint64_t threshold; /* more elements than this are summarized */
  uint64_t edgeitems; /* 0..1e9 */
  int linewidth;      /* 1..1e9 */
} popts_t;

static const popts_t DEFAULT_OPTIONS = {8, FM_MAXPREC, 0, '-', 1000, 3, 75};

#define OPTIONS_START "{!options"

/* The decimal number s[0..n) (no sign, no leading zero) of at most `max`. */
static int number_word(const uint8_t* s, size_t n, uint64_t max, uint64_t* out) {
  uint64_t v = 0;
  size_t i;
  if (!n || (s[0] == '0' && n > 1)) return 0;
  for (i = 0; i < n; i++) {
    unsigned digit;
    if (s[i] < '0' || s[i] > '9') return 0;
    digit = (unsigned)(s[i] - '0');
    if (v > (max - digit) / 10) return 0;
    v = v * 10 + digit;
  }
  *out = v;
  return 1;
}

static int word_is(const uint8_t* s, size_t n, const char* w) {
  return strlen(w) == n && memcmp(s, w, n) == 0;
}

/* The options block at the template's start, if any: `{!options` then
 * ` KEY=VALUE` for any of precision, threshold, edgeitems, linewidth (numbers),
 * suppress (0, 1), sign (minus, plus, space), floatmode (maxprec, unique,
 * fixed, maxprec_equal), then `}`. Sets *skip to its length (0: none). */
static int parse_options(const uint8_t* t, size_t n, popts_t* o, size_t* skip, char* err,
                         size_t err_size) {
  size_t i = sizeof OPTIONS_START - 1;
  *o = DEFAULT_OPTIONS;
  *skip = 0;
  if (n < i || memcmp(t, OPTIONS_START, i) != 0) return 1;
  while (i < n && t[i] == ' ') {
    size_t key, key_len, val, val_len;
    uint64_t v = 0;
    i++;
    key = i;
    while (i < n && t[i] >= 'a' && t[i] <= 'z') i++;
    key_len = i - key;
    if (i >= n || t[i] != '=') break;
    val = ++i;
    while (i < n && t[i] != ' ' && t[i] != '}') i++;
    val_len = i - val;
#define KEY(w) word_is(t + key, key_len, w)
#define VAL(w) word_is(t + val, val_len, w)
#define NUMBER(max) number_word(t + val, val_len, (max), &v)
    if (KEY("precision") && NUMBER(100)) {
      o->precision = (int)v;
    } else if (KEY("threshold") && NUMBER(UINT64_MAX)) {
      o->threshold = v;
    } else if (KEY("edgeitems") && NUMBER(1000000000)) {
      o->edgeitems = v;
    } else if (KEY("linewidth") && NUMBER(1000000000) && v >= 1) {
      o->linewidth = (int)v;
    } else if (KEY("suppress") && (VAL("0") || VAL("1"))) {
      o->suppress = t[val] == '1';
    } else if (KEY("sign") && (VAL("minus") || VAL("plus") || VAL("space"))) {
      o->sign = VAL("minus") ? '-' : VAL("plus") ? '+' : ' ';
    } else if (KEY("floatmode") && (VAL("maxprec") || VAL("unique") || VAL("fixed") ||
                                    VAL("maxprec_equal"))) {
      o->floatmode = VAL("maxprec") ? FM_MAXPREC : VAL("unique") ? FM_UNIQUE
                     : VAL("fixed") ? FM_FIXED : FM_MAXPREC_EQUAL;
    } else {
      snprintf(err, err_size, "debug.print template: byte %zu: print option '%.*s' is not "
               "one of precision=0..100, threshold=N, edgeitems=0..1000000000, "
               "linewidth=1..1000000000, suppress=0|1, sign=minus|plus|space, "
               "floatmode=maxprec|unique|fixed|maxprec_equal", key,
               (int)(i - key < 40 ? i - key : 40), (const char*)t + key);
      return 0;
    }
#undef KEY
#undef VAL
#undef NUMBER
  }
  if (i >= n || t[i] != '}') {
    snprintf(err, err_size, "debug.print template: byte %zu: the {!options ...} block is not "
             "' KEY=VALUE' words closed by '}'", i);
    return 0;
  }
  *skip = i + 1;
  return 1;
}

/* Walks the template: calls back for each literal run and each field
 * (conv: 0, or the conversion r, s or a of `{N!c}`). */
typedef int (*literal_fn)(void* user, const uint8_t* s, size_t n);
typedef int (*field_fn)(void* user, uint32_t index, char conv, const uint8_t* spec,
                        size_t spec_len);

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
      char conv = 0;
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
      if (j + 2 < n && t[j] == '!' && (t[j + 1] == 'r' || t[j + 1] == 's' || t[j + 1] == 'a') &&
          t[j + 2] == '}') {
        conv = (char)t[j + 1];
        j += 2;
      }
      colon = j;
      close = j;
      while (close < n && t[close] != '}' && t[close] != '{') close++;
      if (close >= n || t[close] != '}' || (colon < close && t[colon] != ':')) {
        snprintf(err, err_size, "debug.print template: byte %zu: field is not {N}, {N!r}, "
                 "{N!s}, {N!a} or {N:SPEC}", i);
        return 0;
      }
      if (!field(user, (uint32_t)index, conv, colon < close ? t + colon + 1 : t + close,
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

static int check_field(void* user, uint32_t index, char conv, const uint8_t* spec,
                       size_t spec_len) {
  check_t* c = user;
  spec_t sp;
  (void)conv;
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
  popts_t o;
  size_t skip;
  if (!parse_options(text, n, &o, &skip, err, err_size)) return 0;
  return walk(text ? text + skip : text, n - skip, &c, check_literal, check_field, err,
              err_size);
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

/* ---- numpy's Dragon4 text of one float ----------------------------------- */

/* Trims the fraction of `buf` (n bytes, with a '.') as numpy's trim modes do:
 * 'k' keeps it, '.' drops trailing zeros, '0' keeps one zero after the dot,
 * '-' drops trailing zeros and the dot. Returns the new length. */
static int trim_fraction(char* buf, int n, char trim) {
  if (trim == 'k') return n;
  while (n > 0 && buf[n - 1] == '0') n--;
  if (trim == '0' && buf[n - 1] == '.') buf[n++] = '0';
  if (trim == '-' && buf[n - 1] == '.') n--;
  buf[n] = 0;
  return n;
}

/* numpy's dragon4_positional of finite x read as dtype d (fractional=True):
 * unique: the shortest digits that read back as x, at most `precision` after
 * the point (-1: no limit), at least `min_digits` (more digits of the exact
 * value); else exactly `precision` digits; then `trim`, and '+' before a
 * value without a sign bit when sign_plus. No padding. */
static int d4_positional(double x, kiln_dtype_t d, int precision, int min_digits, int unique,
                         char trim, int sign_plus, char* out, size_t size) {
  char buf[512];
  int n, frac;
  char* dot;
  if (unique) {
    if (x == 0) {
      n = snprintf(buf, sizeof buf, signbit(x) ? "-0." : "0.");
    } else {
      char digits[40];
      int nd, e;
      shortest(x, d, digits, &nd, &e);
      if (precision >= 0 && nd - 1 - e > precision) {
        n = snprintf(buf, sizeof buf, "%.*f", precision, x);
        if (!strchr(buf, '.')) buf[n++] = '.', buf[n] = 0;
        n = trim_fraction(buf, n, '.'); /* unique digits have no trailing zeros */
      } else {
        n = positional(x, d, -1, 0, buf, sizeof buf);
      }
    }
    dot = strchr(buf, '.');
    frac = n - (int)(dot - buf) - 1;
    if (min_digits > frac) n = snprintf(buf, sizeof buf, "%.*f", min_digits, x);
  } else {
    n = snprintf(buf, sizeof buf, "%.*f", precision < 0 ? 0 : precision, x);
  }
  if (!strchr(buf, '.')) buf[n++] = '.', buf[n] = 0;
  n = trim_fraction(buf, n, trim);
  return snprintf(out, size, "%s%s", sign_plus && !signbit(x) ? "+" : "", buf);
}

/* numpy's dragon4_scientific of finite x (as d4_positional, for the
 * mantissa's digits after the point), the exponent with at least
 * max(2, exp_digits) digits. */
static int d4_scientific(double x, kiln_dtype_t d, int precision, int min_digits, int unique,
                         char trim, int sign_plus, int exp_digits, char* out, size_t size) {
  char digits[160], buf[256];
  int nd, e, n = 0, i;
  if (unique) {
    if (x == 0) {
      digits[0] = '0';
      nd = 1;
      e = 0;
    } else {
      shortest(x, d, digits, &nd, &e);
    }
    if (precision >= 0 && nd - 1 > precision) {
      char* p;
      snprintf(buf, sizeof buf, "%.*e", precision, fabs(x));
      nd = 0;
      for (p = buf; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
      e = atoi(p + 1);
      while (nd > 1 && digits[nd - 1] == '0') nd--;
    }
    if (min_digits > nd - 1) {
      char* p;
      snprintf(buf, sizeof buf, "%.*e", min_digits, fabs(x));
      nd = 0;
      for (p = buf; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
      e = atoi(p + 1);
    }
  } else {
    char* p;
    snprintf(buf, sizeof buf, "%.*e", precision < 0 ? 0 : precision, fabs(x));
    nd = 0;
    for (p = buf; *p && *p != 'e'; p++)
      if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    e = atoi(p + 1);
  }
  if (signbit(x)) buf[n++] = '-';
  else if (sign_plus) buf[n++] = '+';
  buf[n++] = digits[0];
  buf[n++] = '.';
  for (i = 1; i < nd; i++) buf[n++] = digits[i];
  buf[n] = 0;
  n = trim_fraction(buf, n, trim);
  if (exp_digits < 2) exp_digits = 2;
  if (exp_digits > 8) exp_digits = 8; /* an exponent has at most 3 (f64) */
  n += snprintf(buf + n, sizeof buf - (size_t)n, "e%c%0*d", e < 0 ? '-' : '+', exp_digits,
                e < 0 ? -e : e);
  return snprintf(out, size, "%s", buf);
}

/* ---- arrays -------------------------------------------------------------- */

/* numpy's FloatingFormat: how one set of floats (an array's, or the real or
 * imaginary parts of a complex one) prints. */
typedef struct {
  kiln_dtype_t dtype; /* of one part: f16, f32 or f64 */
  int exp_format, pad_left, pad_right, precision, min_digits, unique, exp_size;
  char trim, sign;
} ffmt_t;

typedef struct {
  const kiln_buffer_view_t* v;
  kiln_dtype_t dtype;
  size_t rank, esize;
  const int64_t* shape;
  const uint8_t* data;
  const popts_t* o;
  int summarize;
  size_t edge;
  ffmt_t real, imag; /* floats: real; complex: both */
  int int_width;     /* integers: the width; int_sign: '+', ' ' or 0 */
  char int_sign;
} arr_t;

static int is_complex(kiln_dtype_t d) { return d == KILN_DTYPE_C64 || d == KILN_DTYPE_C128; }

/* The part (0: real, 1: imaginary) of a float or complex element. */
static double get_part(kiln_dtype_t d, const uint8_t* p, int part) {
  float f;
  double x;
  if (d == KILN_DTYPE_C64) {
    memcpy(&f, p + 4 * part, 4);
    return f;
  }
  if (d == KILN_DTYPE_C128) {
    memcpy(&x, p + 8 * part, 8);
    return x;
  }
  return get_float(d, p);
}

/* The elements that are shown (all, or the edges of every axis when
 * summarized), in order, without visiting the hidden ones: a summarized
 * array of 10^9 elements costs no more than one of 10^3. */
typedef struct {
  size_t idx[KILN_MAX_RANK];
  size_t flat;
  int more;
} shown_t;

/* numpy's show_summary for an axis of n: 2 * edgeitems < n */
static int summarized_axis(const arr_t* a, size_t n) {
  return a->summarize && n > 0 && a->edge <= (n - 1) / 2;
}

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
    if (summarized_axis(a, n) && w->idx[k] == a->edge) w->idx[k] = n - a->edge;
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

/* numpy's FloatingFormat.fillFormat over the shown elements' `part`. */
static void ffmt_fill(const arr_t* a, int part, char sign, ffmt_t* f) {
  const popts_t* o = a->o;
  shown_t w;
  double mx = 0, mn = 0;
  int any_nz = 0, any_finite = 0, any_nonfinite = 0, neg_inf = 0, any_signbit = 0;
  char buf[600];
  f->dtype = a->dtype == KILN_DTYPE_C64 ? KILN_DTYPE_F32
             : a->dtype == KILN_DTYPE_C128 ? KILN_DTYPE_F64 : a->dtype;
  f->sign = sign;
  f->exp_format = 0;
  f->precision = o->floatmode == FM_UNIQUE ? -1 : o->precision;
  for (shown_first(a, &w); w.more; shown_next(a, &w)) {
    double x = get_part(a->dtype, a->data + w.flat * a->esize, part);
    if (!isfinite(x)) {
      any_nonfinite = 1;
      if (isinf(x) && x < 0) neg_inf = 1;
      continue;
    }
    any_finite = 1;
    if (signbit(x)) any_signbit = 1;
    if (x != 0) {
      double ax = fabs(x);
      if (!any_nz || ax > mx) mx = ax;
      if (!any_nz || ax < mn) mn = ax;
      any_nz = 1;
    }
  }
  /* numpy 2.3+: the cutoff is 10**min(8, finfo(dtype).precision) */
  if (any_nz && (mx >= (f->dtype == KILN_DTYPE_F16 ? 1e3 : f->dtype == KILN_DTYPE_F32 ? 1e6 : 1e8) ||
                 (!o->suppress && (mn < 1e-4 || mx / mn > 1e3))))
    f->exp_format = 1;
  if (!any_finite) {
    f->pad_left = f->pad_right = 0;
    f->trim = '.';
    f->exp_size = -1;
    f->unique = 1;
    f->min_digits = 0;
  } else {
    int fixed = o->floatmode == FM_FIXED;
    int frac_max = 0, int_max = 0, exp_max = 0;
    char trim = fixed ? 'k' : '.';
    f->unique = !fixed;
    for (shown_first(a, &w); w.more; shown_next(a, &w)) {
      double x = get_part(a->dtype, a->data + w.flat * a->esize, part);
      int n, dot, e;
      if (!isfinite(x)) continue;
      if (f->exp_format) {
        n = d4_scientific(x, f->dtype, f->precision, 0, f->unique, trim, sign == '+', -1, buf,
                          sizeof buf);
        for (e = 0; buf[e] != 'e'; e++) {}
        for (dot = 0; buf[dot] != '.'; dot++) {}
        if (dot > int_max) int_max = dot;
        if (e - dot - 1 > frac_max) frac_max = e - dot - 1;
        if (n - e - 2 > exp_max) exp_max = n - e - 2;
      } else {
        n = d4_positional(x, f->dtype, f->precision, 0, f->unique, trim, sign == '+', buf,
                          sizeof buf);
        for (dot = 0; buf[dot] != '.'; dot++) {}
        if (dot > int_max) int_max = dot;
        if (n - dot - 1 > frac_max) frac_max = n - dot - 1;
      }
    }
    f->pad_left = int_max;
    if (f->exp_format) {
      f->exp_size = exp_max;
      f->trim = 'k';
      f->precision = f->min_digits = frac_max;
      f->pad_right = exp_max + 2 + frac_max;
    } else {
      f->pad_right = frac_max;
      f->exp_size = -1;
      if (fixed || o->floatmode == FM_MAXPREC_EQUAL) {
        f->precision = f->min_digits = frac_max;
        f->trim = 'k';
      } else {
        f->trim = '.';
        f->min_digits = 0;
      }
    }
    if (sign == ' ' && !any_signbit) f->pad_left++;
  }
  if (any_nonfinite) {
    int offset = f->pad_right + 1, neg = sign != '-' || neg_inf;
    if (3 - offset > f->pad_left) f->pad_left = 3 - offset;
    if (3 + neg - offset > f->pad_left) f->pad_left = 3 + neg - offset;
  }
}

/* numpy's FloatingFormat.__call__ */
static void ffmt_text(const ffmt_t* f, double x, sb_t* out) {
  char buf[600];
  int n, dot;
  if (!isfinite(x)) {
    const char* t = isnan(x) ? (f->sign == '+' ? "+nan" : "nan")
                    : x < 0 ? "-inf" : (f->sign == '+' ? "+inf" : "inf");
    int width = f->pad_left + f->pad_right + 1 - (int)strlen(t);
    if (width > 0) sb_spaces(out, (size_t)width);
    sb_str(out, t);
    return;
  }
  if (f->exp_format)
    n = d4_scientific(x, f->dtype, f->precision, f->min_digits, f->unique, f->trim,
                      f->sign == '+', f->exp_size, buf, sizeof buf);
  else
    n = d4_positional(x, f->dtype, f->precision, f->min_digits, f->unique, f->trim,
                      f->sign == '+', buf, sizeof buf);
  for (dot = 0; buf[dot] != '.'; dot++) {}
  if (f->pad_left > dot) sb_spaces(out, (size_t)(f->pad_left - dot));
  sb_add(out, buf, (size_t)n);
  if (!f->exp_format && f->pad_right > n - dot - 1)
    sb_spaces(out, (size_t)(f->pad_right - (n - dot - 1)));
}

static void prepare(arr_t* a) {
  shown_t w;
  a->int_width = 0;
  a->int_sign = 0;
  if (a->dtype == KILN_DTYPE_F16 || a->dtype == KILN_DTYPE_F32 || a->dtype == KILN_DTYPE_F64) {
    ffmt_fill(a, 0, a->o->sign, &a->real);
  } else if (is_complex(a->dtype)) {
    ffmt_fill(a, 0, a->o->sign, &a->real);
    ffmt_fill(a, 1, '+', &a->imag);
  } else if (a->dtype != KILN_DTYPE_BOOL && a->dtype != KILN_DTYPE_BF16) {
    /* numpy's IntegerFormat: '{:<sign><width>d}' */
    char buf[32], sign = a->o->sign;
    int max_len = 0, min_len = 0, any = 0, max_nonneg = 0;
    int64_t mx = 0, mn = 0;
    uint64_t umx = 0, umn = 0;
    for (shown_first(a, &w); w.more; shown_next(a, &w)) {
      const uint8_t* p = a->data + w.flat * a->esize;
      if (a->dtype == KILN_DTYPE_U64) {
        uint64_t u = get_u64(p);
        if (!any || u > umx) umx = u;
        if (!any || u < umn) umn = u;
      } else {
        int64_t x = get_int(a->dtype, p);
        if (!any || x > mx) mx = x;
        if (!any || x < mn) mn = x;
      }
      any = 1;
    }
    if (any) {
      if (a->dtype == KILN_DTYPE_U64) {
        max_len = snprintf(buf, sizeof buf, "%llu", (unsigned long long)umx);
        min_len = snprintf(buf, sizeof buf, "%llu", (unsigned long long)umn);
        max_nonneg = 1;
      } else {
        max_len = snprintf(buf, sizeof buf, "%lld", (long long)mx);
        min_len = snprintf(buf, sizeof buf, "%lld", (long long)mn);
        max_nonneg = mx >= 0;
        if (sign == ' ' && mn < 0) sign = '-';
      }
      if (max_nonneg && (sign == '+' || sign == ' ')) max_len++;
    }
    a->int_width = max_len > min_len ? max_len : min_len;
    a->int_sign = sign == '-' ? 0 : sign;
  }
}

/* One element of an array as numpy's array formatter writes it. */
static void element(const arr_t* a, size_t flat, sb_t* out) {
  const uint8_t* p = a->data + flat * a->esize;
  char buf[160];
  int n;
  if (a->dtype == KILN_DTYPE_BOOL) {
    sb_str(out, *p ? (a->rank ? " True" : "True") : "False");
  } else if (a->dtype == KILN_DTYPE_BF16) {
    double x = get_float(a->dtype, p);
    n = isnan(x) ? snprintf(buf, sizeof buf, "nan") : snprintf(buf, sizeof buf, "%g", x);
    sb_add(out, buf, (size_t)n);
  } else if (is_float(a->dtype)) {
    ffmt_text(&a->real, get_float(a->dtype, p), out);
  } else if (is_complex(a->dtype)) {
    size_t start, end;
    ffmt_text(&a->real, get_part(a->dtype, p, 0), out);
    start = out->len;
    ffmt_text(&a->imag, get_part(a->dtype, p, 1), out);
    if (out->failed) return;
    /* the 'j' before the imaginary part's trailing spaces */
    for (end = out->len; end > start && out->p[end - 1] == ' '; end--) {}
    sb_str(out, " ");
    if (out->failed) return;
    memmove(out->p + end + 1, out->p + end, out->len - 1 - end);
    out->p[end] = 'j';
  } else {
    char* q = buf;
    if (a->dtype == KILN_DTYPE_U64 || get_int(a->dtype, p) >= 0)
      if (a->int_sign) *q++ = a->int_sign;
    n = (int)(q - buf) + int_text(a->dtype, p, q, sizeof buf - (size_t)(q - buf));
    if (a->int_width > n) sb_spaces(out, (size_t)(a->int_width - n));
    sb_add(out, buf, (size_t)n);
  }
}

/* numpy's _extendLine: `line` gets `word`, first wrapping into `s` when it would
 * pass `width` (unless the line holds only the indent). */
static void extend_line(sb_t* s, sb_t* line, const char* word, size_t wlen, long width,
                        size_t indent) {
  if ((long)(line->len + wlen) > width && line->len > indent) {
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
 * its first element) along axes [axis, rank), hanging indent `indent` spaces;
 * `sep` is ' ' (str) or ", " (repr). */
static void recurse(const arr_t* a, size_t axis, size_t base, size_t stride, size_t indent,
                    long width, const char* sep, sb_t* out) {
  size_t axes_left = a->rank - axis, n = (size_t)a->shape[axis], inner = stride / (n ? n : 1);
  int summary = summarized_axis(a, n);
  size_t leading = summary ? a->edge : 0, trailing = summary ? a->edge : n, i;
  sb_t s = {0};
  s.max = out->max;
  if (axes_left == 1) {
    long elem_width = width - 1; /* max(len(sep.rstrip()), len(']')) */
    sb_t line = {0}, word = {0};
    line.max = word.max = out->max;
    sb_spaces(&line, indent);
    for (i = 0; i < leading && !s.failed && !line.failed; i++) {
      word.len = 0;
      element(a, base + i * inner, &word);
      extend_line(&s, &line, word.p, word.len, elem_width, indent);
      sb_str(&line, sep);
    }
    if (summary) {
      extend_line(&s, &line, "...", 3, elem_width, indent);
      sb_str(&line, sep);
    }
    for (i = trailing; i > 1 && !s.failed && !line.failed; i--) {
      word.len = 0;
      element(a, base + (n - i) * inner, &word);
      extend_line(&s, &line, word.p, word.len, elem_width, indent);
      sb_str(&line, sep);
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
    size_t k, rows = leading + (summary ? 1 : 0) + trailing;
    for (i = 0; i < rows && !s.failed; i++) {
      size_t row;
      sb_spaces(&s, indent);
      if (summary && i == leading) {
        sb_str(&s, "...");
      } else {
        row = i < leading ? i : n - (rows - i);
        recurse(a, axis + 1, base + row * inner, inner, indent + 1, width - 1, sep, &s);
      }
      if (i + 1 < rows) {
        if (sep[0] == ',') sb_str(&s, ",");
        for (k = 1; k < axes_left; k++) sb_str(&s, "\n");
      }
    }
  }
  sb_str(out, "[");
  if (s.p && s.len >= indent) sb_add(out, s.p + indent, s.len - indent);
  sb_str(out, "]");
  sb_fail(out, s.failed);
  free(s.p);
}

/* Python's repr of a float without the ".0" it adds to integral values (the
 * parts of Python's complex repr); numpy's str of a complex scalar's parts
 * when d is its part's dtype. */
static int part_text(double x, kiln_dtype_t d, char* out, size_t size) {
  int n = scalar_float_text(x, d, out, size);
  if (n >= 2 && out[n - 2] == '.' && out[n - 1] == '0') out[n -= 2] = 0;
  return n;
}

/* Python's repr of a complex number (or numpy's str of a complex scalar,
 * with d the dtype of its parts): "1j", "(1+2j)", "(nan-infj)". */
static void complex_scalar_text(double re, double im, kiln_dtype_t d, sb_t* out) {
  char r[160], i[160];
  part_text(im, d, i, sizeof i);
  if (re == 0 && !signbit(re)) {
    sb_str(out, i);
    sb_str(out, "j");
    return;
  }
  part_text(re, d, r, sizeof r);
  sb_str(out, "(");
  sb_str(out, r);
  if (i[0] != '-') sb_str(out, "+");
  sb_str(out, i);
  sb_str(out, "j)");
}

/* A 0-d value as Python's format() of the item (conv 0) or numpy's str() of
 * the scalar (conv 's'). */
static void scalar_text(const arr_t* a, char conv, sb_t* out) {
  char buf[160];
  int n;
  kiln_dtype_t part = conv == 's' ? (a->dtype == KILN_DTYPE_C64 ? KILN_DTYPE_F32
                                     : a->dtype == KILN_DTYPE_C128 ? KILN_DTYPE_F64 : a->dtype)
                                  : KILN_DTYPE_F64;
  if (a->dtype == KILN_DTYPE_BOOL) {
    sb_str(out, *a->data ? "True" : "False");
  } else if (is_complex(a->dtype)) {
    complex_scalar_text(get_part(a->dtype, a->data, 0), get_part(a->dtype, a->data, 1), part, out);
  } else if (is_float(a->dtype)) {
    double x = get_float(a->dtype, a->data);
    /* numpy's str of a bfloat16 scalar is ml_dtypes' (%g-like); Python's
     * format of the float it converts to otherwise */
    if (conv == 's' && a->dtype == KILN_DTYPE_BF16)
      n = isnan(x) ? snprintf(buf, sizeof buf, "nan") : snprintf(buf, sizeof buf, "%g", x);
    else
      n = scalar_float_text(x, part == KILN_DTYPE_BF16 ? KILN_DTYPE_F32 : part, buf, sizeof buf);
    sb_add(out, buf, (size_t)n);
  } else {
    n = int_text(a->dtype, a->data, buf, sizeof buf);
    sb_add(out, buf, (size_t)n);
  }
}

/* Whether numpy's repr leaves the dtype out (float64, int64, bool,
 * complex128). */
static int dtype_implied(kiln_dtype_t d) {
  return d == KILN_DTYPE_F64 || d == KILN_DTYPE_I64 || d == KILN_DTYPE_BOOL ||
         d == KILN_DTYPE_C128;
}

static const char* numpy_dtype_name(kiln_dtype_t d) {
  switch (d) {
    case KILN_DTYPE_F16: return "float16";
    case KILN_DTYPE_BF16: return "bfloat16";
    case KILN_DTYPE_F32: return "float32";
    case KILN_DTYPE_F64: return "float64";
    case KILN_DTYPE_C64: return "complex64";
    case KILN_DTYPE_C128: return "complex128";
    case KILN_DTYPE_I8: return "int8";
    case KILN_DTYPE_I16: return "int16";
    case KILN_DTYPE_I32: return "int32";
    case KILN_DTYPE_I64: return "int64";
    case KILN_DTYPE_U8: return "uint8";
    case KILN_DTYPE_U16: return "uint16";
    case KILN_DTYPE_U32: return "uint32";
    case KILN_DTYPE_U64: return "uint64";
    default: return "bool";
  }
}

/* numpy's str() (conv 0 or 's' of rank >= 1, and 's' of 0-d values) or
 * repr() (conv 'r' or 'a') of a buffer; "{}".format of a 0-d one is Python's
 * format of the item. */
static void array_text(const kiln_buffer_view_t* v, const popts_t* o, char conv, sb_t* out) {
  arr_t a;
  int repr = conv == 'r' || conv == 'a';
  size_t count = kiln_buffer_view_element_count(v), start = out->len;
  memset(&a, 0, sizeof a);
  a.v = v;
  a.o = o;
  a.dtype = kiln_buffer_view_dtype(v);
  a.rank = kiln_buffer_view_rank(v);
  a.shape = kiln_buffer_view_shape(v);
  a.esize = kiln_dtype_size(a.dtype);
  a.data = kiln_buffer_view_data(v);
  a.edge = (size_t)o->edgeitems;
  if (a.rank == 0 && !repr) {
    /* Python's "{}".format of a 0-d array: numpy formats the Python float
     * (or int) it converts to, so repr() of the value as a double: 0.1 in f32
     * prints 0.10000000149011612, as in JAX. */
    scalar_text(&a, conv, out);
    return;
  }
  if (repr) sb_str(out, "array(");
  if (count == 0) {
    sb_str(out, "[]");
  } else {
    a.summarize = count > o->threshold;
    if (out->max) {
      /* Every shown element takes two bytes at least (a digit, a separator):
       * refuse at once what cannot fit, before formatting any of it. */
      size_t shown = 1, k;
      for (k = 0; k < a.rank; k++)
        shown *= summarized_axis(&a, (size_t)a.shape[k]) ? 2 * a.edge : (size_t)a.shape[k];
      if (shown > out->max / 2) {
        sb_fail(out, SB_TOO_LONG);
        return;
      }
    }
    prepare(&a);
    if (a.rank == 0)
      element(&a, 0, out);
    else
      recurse(&a, 0, 0, count, repr ? 7 : 1, repr ? o->linewidth - 1 : o->linewidth,
              repr ? ", " : " ", out);
  }
  if (repr && !out->failed) {
    /* numpy's array_repr: shape and dtype where the text does not show them,
     * on a line of their own when they would pass the line width */
    char extra[64 + 22 * KILN_MAX_RANK];
    size_t k, line_start, m = 0;
    int shape = (count == 0 && !(a.rank == 1 && a.shape[0] == 0)) || count > o->threshold;
    int dtype = !dtype_implied(a.dtype) || count == 0;
    if (shape) {
      m += (size_t)snprintf(extra + m, sizeof extra - m, "shape=(");
      for (k = 0; k < a.rank; k++)
        m += (size_t)snprintf(extra + m, sizeof extra - m, "%s%lld", k ? ", " : "",
                              (long long)a.shape[k]);
      m += (size_t)snprintf(extra + m, sizeof extra - m, a.rank == 1 ? ",)" : ")");
    }
    if (dtype)
      m += (size_t)snprintf(extra + m, sizeof extra - m, "%sdtype=%s", shape ? ", " : "",
                            numpy_dtype_name(a.dtype));
    if (m) {
      sb_str(out, ",");
      if (out->failed) return;
      for (line_start = out->len; line_start > start && out->p[line_start - 1] != '\n';
           line_start--) {}
      if ((long)(out->len - line_start + m + 1 + 1) > o->linewidth)
        sb_str(out, "\n      ");
      else
        sb_str(out, " ");
      sb_add(out, extra, m);
    }
    sb_str(out, ")");
  }
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
  const popts_t* o;
  kiln_status_t status;
} fill_t;

static int fill_literal(void* user, const uint8_t* s, size_t n) {
  sb_add(&((fill_t*)user)->out, (const char*)s, n);
  return !((fill_t*)user)->out.failed;
}

static int fill_field(void* user, uint32_t index, char conv, const uint8_t* spec,
                      size_t spec_len) {
  fill_t* f = user;
  spec_t sp;
  kiln_dtype_t d = kiln_buffer_view_dtype(f->values[index]);
  if (!kiln_dtype_size(d)) {
    f->status = kiln_make_status(KILN_INVALID_ARGUMENT, "debug.print: field {%u}: its value "
                                 "has no printable dtype", (unsigned)index);
    return 0;
  }
  if (!spec_len) {
    array_text(f->values[index], f->o, conv, &f->out);
    return !f->out.failed; /* stop at once: the rest cannot be kept */
  }
  /* The types of a function's values are the module's: nothing at load
   * time keeps a complex one out of a spec, and its bytes read as an integer
   * would overrun. */
  if (is_complex(d)) {
    f->status = kiln_make_status(KILN_INVALID_ARGUMENT, "debug.print: field {%u}: its value is "
                                 "%s, and a format spec does not format complex values",
                                 (unsigned)index, kiln_dtype_name(d));
    return 0;
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
  popts_t o;
  size_t skip = 0;
  char err[400] = "";
  int ok;
  memset(&f, 0, sizeof f);
  f.values = values;
  f.o = &o;
  f.out.max = max_line;
  *out = NULL;
  *out_len = 0;
  ok = parse_options(text, n, &o, &skip, err, sizeof err) &&
       walk(text ? text + skip : text, n - skip, &f, fill_literal, fill_field, err, sizeof err);
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
