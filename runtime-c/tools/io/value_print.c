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
  /* numpy writes whole floats as "1." */
  if (!strpbrk(buf, ".eEn")) {
    size_t len = strlen(buf);
    if (len + 1 < buf_size) {
      buf[len] = '.';
      buf[len + 1] = '\0';
    }
  }
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
    case KILN_DTYPE_BOOL:
      snprintf(buf, buf_size, "%s", ((const uint8_t*)data)[i] ? "True" : "False");
      break;
    default:
      snprintf(buf, buf_size, "?");
      break;
  }
}

#define KILN_SUMMARY_THRESHOLD 1000
#define KILN_EDGE_ITEMS 3

typedef struct {
  FILE* out;
  const kiln_buffer_view_t* view;
  const int64_t* shape;
  size_t rank;
  int summarize;
  int width;      /* widest element */
  int left, right; /* widest parts before / after the '.' of positional floats */
  int measure;    /* pass 1: only compute the widths */
} kiln_printer_t;

/* Visits the printed elements of dimension `dim` starting at flat `offset`. */
static void kiln_print_dim(kiln_printer_t* pr, size_t dim, size_t offset) {
  size_t stride = 1;
  for (size_t d = dim + 1; d < pr->rank; ++d) stride *= (size_t)pr->shape[d];
  size_t n = (size_t)pr->shape[dim];
  int cut = pr->summarize && n > 2 * KILN_EDGE_ITEMS;
  if (!pr->measure) fputc('[', pr->out);
  for (size_t i = 0; i < n; ++i) {
    if (cut && i == KILN_EDGE_ITEMS) {
      if (!pr->measure) {
        if (dim + 1 == pr->rank) {
          fputs(" ...", pr->out);
        } else {
          fputc('\n', pr->out);
          for (size_t d = 0; d <= dim; ++d) fputc(' ', pr->out);
          fputs("...", pr->out);
        }
      }
      i = n - KILN_EDGE_ITEMS;
    }
    if (i > 0 && !pr->measure) {
      if (dim + 1 == pr->rank) {
        fputc(' ', pr->out);
      } else {
        /* One newline per remaining dimension, then align under '['. */
        for (size_t d = dim + 1; d < pr->rank; ++d) fputc('\n', pr->out);
        for (size_t d = 0; d <= dim; ++d) fputc(' ', pr->out);
      }
    }
    if (dim + 1 == pr->rank) {
      char buf[64];
      kiln_io_format_element(pr->view, offset + i, buf, sizeof(buf));
      int len = (int)strlen(buf);
      /* Floats in positional form line up on their '.' as numpy does. */
      const char* dot = strchr(buf, '.');
      int positional = dot && !strpbrk(buf, "en");
      int left = positional ? (int)(dot - buf) : len;
      int right = positional ? len - left - 1 : 0;
      if (pr->measure) {
        if (len > pr->width) pr->width = len;
        if (positional) {
          if (left > pr->left) pr->left = left;
          if (right > pr->right) pr->right = right;
        }
      } else {
        int aligned = pr->left + 1 + pr->right;
        int column = pr->width > aligned ? pr->width : aligned;
        if (positional && pr->left + 1 + pr->right >= pr->width) {
          fprintf(pr->out, "%*s%s%*s", pr->left - left, "", buf, pr->right - right, "");
        } else {
          fprintf(pr->out, "%*s", column, buf);
        }
      }
    } else {
      kiln_print_dim(pr, dim + 1, offset + i * stride);
    }
  }
  if (!pr->measure) fputc(']', pr->out);
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
  kiln_printer_t pr = {out, view, shape, rank,
                       kiln_buffer_view_element_count(view) > KILN_SUMMARY_THRESHOLD,
                       0, 0, 0, 1};
  kiln_print_dim(&pr, 0, 0);
  pr.measure = 0;
  kiln_print_dim(&pr, 0, 0);
  fputc('\n', out);
}
