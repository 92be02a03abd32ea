/* debug.print (format 2.8, 2.9): the template of kiln.debug.print and numpy-style
 * text of buffers.
 *
 * A template is UTF-8 text in a 1-d u8 constant. `{{` and `}}` are braces;
 * `{N}` is value N printed as numpy's str() prints the array (a 0-d one as
 * Python's repr() prints the float or int it converts to: what
 * "{}".format(array) gives); `{N:SPEC}` is a 0-d value formatted as Python's
 * format(value, SPEC) formats the float or int it converts to, for the subset
 * SPEC = [[fill]align][sign][0][width][.precision][type] with align one of
 * `<>^=`, sign one of `+- `, and type one of `fFeEgGd` or none (none needs no
 * precision). Format 2.9 adds `{N!r}`, `{N!s}`, `{N!a}` (numpy's repr, str and
 * ascii of the array), complex values, and a leading `{!options KEY=VALUE ...}`
 * block of numpy print options (precision, threshold, edgeitems, linewidth,
 * suppress, sign, floatmode) the arrays are printed with. kiln.debug.print
 * checks a format against this subset when it traces it. */
#ifndef KILN_DEBUG_PRINT_H_
#define KILN_DEBUG_PRINT_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime.h"

/* Whether `text` (n bytes) is a template whose fields all name one of
 * `value_count` values; on failure writes why into err. */
int kiln_debug_print_check_template(const uint8_t* text, size_t n, uint32_t value_count,
                                    char* err, size_t err_size);

/* The longest line debug.print writes (a template of many fields of large
 * arrays could otherwise ask for gigabytes): longer is OUT_OF_MEMORY. */
#define KILN_DEBUG_PRINT_MAX_LINE ((size_t)64 << 20)

/* The printed line (the template filled in, then '\n') in a new malloc'ed,
 * NUL-terminated string in *out and its length in *out_len; a line of more
 * than max_line bytes (0: no limit) is an error, found before formatting
 * what cannot fit. */
kiln_status_t kiln_debug_print_format(const uint8_t* text, size_t n,
                                      const kiln_buffer_view_t* const* values,
                                      uint32_t value_count, size_t max_line, char** out,
                                      size_t* out_len);

#endif /* KILN_DEBUG_PRINT_H_ */
