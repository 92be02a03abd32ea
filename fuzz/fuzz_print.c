/* libFuzzer target: the debug.print template parser and formatter alone
 * (runtime-c/src/debug_print.c, format 2.8), thousands of times faster than
 * reaching them through a module. The input is read as
 *
 *   [count] then per value [dtype][rank][dims...] then [template length]
 *   [template bytes] and the rest: the values' bytes (repeated to fill them)
 *
 * A template the checker refuses must say why; one it accepts is formatted
 * (line limit 1 MiB) and either fails with a message or gives one
 * '\n'-ended, NUL-terminated line. Any crash, leak or undefined behaviour
 * (ASan + UBSan) is a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug_print.h"
#include "kiln/runtime.h"

#define MAX_VALUES 4
#define MAX_ELEMENTS 65536

const char* __asan_default_options(void);
const char* __asan_default_options(void) { return "allocator_may_return_null=1:detect_leaks=1"; }

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln_buffer_view_t* views[MAX_VALUES] = {NULL};
  const uint8_t *template, *fill;
  size_t pos = 1, tlen, fill_len, k;
  uint32_t count;
  char err[256] = "";
  if (size < 2) return 0;
  count = data[0] % (MAX_VALUES + 1);
  for (k = 0; k < count; ++k) {
    int64_t shape[KILN_MAX_RANK];
    size_t rank, r, elements = 1;
    kiln_dtype_t dtype;
    if (pos + 2 > size) goto out;
    dtype = (kiln_dtype_t)(data[pos] % KILN_DTYPE_COUNT);
    rank = data[pos + 1] % 6;
    pos += 2;
    for (r = 0; r < rank; ++r) {
      /* a byte: 0..199 as is, 200..255 up to 1400 (past the summarization threshold) */
      int64_t d = pos < size ? data[pos++] : 1;
      if (d >= 200) d = (d - 200) * 25;
      if (d && elements * (size_t)d > MAX_ELEMENTS) d = 1;
      shape[r] = d;
      elements *= (size_t)d;
    }
    if (kiln_buffer_view_create(dtype, rank, shape, NULL, 0, &views[k])) goto out;
  }
  if (pos >= size) goto out;
  tlen = data[pos++];
  if (tlen > size - pos) tlen = size - pos;
  template = data + pos;
  fill = data + pos + tlen;
  fill_len = size - pos - tlen;
  for (k = 0; k < count; ++k) {
    uint8_t* p = kiln_buffer_view_mutable_data(views[k]);
    size_t b, bytes = kiln_buffer_view_byte_size(views[k]);
    for (b = 0; b < bytes; ++b) p[b] = fill_len ? fill[b % fill_len] : 0;
  }
  if (!kiln_debug_print_check_template(tlen ? template : NULL, tlen, count, err, sizeof err)) {
    if (!err[0]) {
      fprintf(stderr, "fuzz_print: a refused template without a reason\n");
      abort();
    }
  } else {
    char* text = NULL;
    size_t len = 0;
    kiln_status_t s = kiln_debug_print_format(tlen ? template : NULL, tlen,
                                              (const kiln_buffer_view_t* const*)views, count,
                                              (size_t)1 << 20, &text, &len);
    if (s) {
      if (!kiln_status_message(s)[0] || text) abort();
      kiln_status_free(s);
    } else {
      if (!text || !len || text[len - 1] != '\n' || text[len] != '\0' || len > ((size_t)1 << 20))
        abort();
      free(text);
    }
  }
out:
  for (k = 0; k < MAX_VALUES; ++k) kiln_buffer_view_release(views[k]);
  return 0;
}
