/* Value I/O shared by kiln-run, the embedding example and the tests:
 *   - parsing command-line values:   "2x3xf32=1,2,3,4,5,6", "f32=3.5",
 *                                     "4xi32=7" (one value broadcasts), "@x.npy"
 *   - printing buffer views in a numpy-like form
 *   - reading and writing .npy files and stored (uncompressed) .npz archives
 *   - float16 / bfloat16 conversions
 * Everything reports errors as kiln_status_t with messages that name the
 * input and say what was expected and what was found. */
#ifndef KILN_TOOLS_IO_H_
#define KILN_TOOLS_IO_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- half precision ---------------------------------------------------- */

float kiln_f16_to_f32(uint16_t h);
uint16_t kiln_f32_to_f16(float f); /* round to nearest even */
float kiln_bf16_to_f32(uint16_t h);
uint16_t kiln_f32_to_bf16(float f); /* round to nearest even */

/* ---- command-line values ----------------------------------------------- */

/* Parses a type "2x3xf32" / "f32" (0-d). */
kiln_status_t kiln_io_parse_type(const char* text, kiln_dtype_t* dtype,
                                 size_t* rank, int64_t shape[KILN_MAX_RANK]);

/* Parses "TYPE=v1,v2,..." (values separated by commas, blanks and/or
 * brackets, so "2x2xf32=[[1, 2], [3, 4]]" works too; exactly
 * one value per element, or a single value broadcast to every element),
 * "TYPE" alone (zeros), "@path.npy", "@path.npz:NAME" (the archive's array
 * NAME) or "@path.npz" when the archive holds exactly one array. Files are
 * told apart by their contents (a zip archive or a .npy), so the suffixes
 * are not required; NAME follows the last ".npz:" of the text. */
kiln_status_t kiln_io_parse_value(const char* text, kiln_buffer_view_t** out);

struct kiln_npz;

/* A value that may stand for several: "@path.npz" gives every array of the
 * archive, in the archive's order, with its name; anything else what
 * kiln_io_parse_value gives, as one entry without a name (NULL). Free `out`
 * with kiln_npz_free. */
kiln_status_t kiln_io_parse_values(const char* text, struct kiln_npz* out);

/* The file part of kiln_io_parse_value: `text` is what follows the '@'. */
kiln_status_t kiln_io_parse_file_value(const char* text, kiln_buffer_view_t** out);

/* ---- comparing values (kiln-run --expected_output) --------------------- */

/* Absolute thresholds under which two floats count as equal, per dtype:
 * `f16` for f16 and bf16, `f32` for f32 and each part of c64, `f64` for f64
 * and each part of c128. */
typedef struct kiln_io_tolerance {
  double f16;
  double f32;
  double f64;
} kiln_io_tolerance_t;

/* iree-run-module's defaults: f16 1e-3, f32 1e-4, f64 1e-4. */
void kiln_io_tolerance_initialize(kiln_io_tolerance_t* tolerance);

/* NULL when `got` matches `expected`: the same dtype and shape, integers and
 * bools equal, floats within the tolerance (NULL: the defaults), NaN matching
 * NaN and an infinity the same infinity. Else a FAILED_PRECONDITION status
 * saying "expected 3xf32, got 2xf32", or naming the first element that
 * differs: "element [1, 0] (the first that differs): got 2.5, expected 2
 * (difference 0.5 > the f32 threshold 0.0001)". */
kiln_status_t kiln_io_compare(const kiln_buffer_view_t* got, const kiln_buffer_view_t* expected,
                              const kiln_io_tolerance_t* tolerance);

/* Where bf16 is `expected` and *view is u16 (numpy's raw bfloat16 bits, '<u2', which
 * .npy files hold since numpy has no bfloat16), replaces *view by a bf16 view of the
 * same bits; leaves any other view as it is. */
kiln_status_t kiln_io_bf16_from_bits(kiln_buffer_view_t** view, kiln_dtype_t expected);

/* Writes one element (index `i`) of `view` as text, shortest form that reads
 * back to the same value. */
void kiln_io_format_element(const kiln_buffer_view_t* view, size_t i,
                            char* buf, size_t buf_size);

/* Prints the values as numpy's str() does ("[[1. 2.]\n [3. 4.]]": 75-column
 * lines, "..." past 1000 elements, positional or scientific notation chosen
 * for the whole array, precision 8); a 0-d view prints its scalar's shortest
 * form. Ends with a newline. */
void kiln_io_print_values(FILE* out, const kiln_buffer_view_t* view);

/* ---- files ------------------------------------------------------------- */

/* Reads a whole file (malloc'd; NOT_FOUND / IO errors name the path). */
kiln_status_t kiln_io_read_file(const char* path, uint8_t** data, size_t* size);
kiln_status_t kiln_io_write_file(const char* path, const void* data, size_t size);

/* .npy: numpy's array file. Reads versions 1.0-3.0, little or big endian,
 * C or Fortran order, dtypes f4 f8 f2 i1 i2 i4 i8 u1 u2 u4 u8 b1 c8 c16, and V2 (what
 * numpy writes for ml_dtypes.bfloat16) as bfloat16. bfloat16 is written as u2,
 * its raw bits, since numpy has no bfloat16; reading gives u16, which
 * kiln_io_bf16_from_bits turns back into bf16 where a bf16 value is expected.
 * `what` names the source in error messages. */
kiln_status_t kiln_npy_decode(const uint8_t* data, size_t size, const char* what,
                              kiln_buffer_view_t** out);
kiln_status_t kiln_npy_encode(const kiln_buffer_view_t* view, uint8_t** out,
                              size_t* out_size);
kiln_status_t kiln_npy_read_file(const char* path, kiln_buffer_view_t** out);
kiln_status_t kiln_npy_write_file(const char* path, const kiln_buffer_view_t* view);

/* .npz: a zip of NAME.npy entries (numpy.savez). Reads stored entries
 * (compressed ones give an error naming the entry), zip64 included; writes
 * stored entries with CRC-32 and fixed timestamps (deterministic bytes),
 * switching to zip64 records when sizes or counts need them. Names are given and
 * returned without the ".npy" suffix. */
typedef struct kiln_npz_entry {
  char* name;
  kiln_buffer_view_t* value;
} kiln_npz_entry_t;

typedef struct kiln_npz {
  size_t count;
  kiln_npz_entry_t* entries;
} kiln_npz_t;

kiln_status_t kiln_npz_decode(const uint8_t* data, size_t size, const char* what,
                              kiln_npz_t* out);
kiln_status_t kiln_npz_read_file(const char* path, kiln_npz_t* out);
void kiln_npz_free(kiln_npz_t* npz);
kiln_status_t kiln_npz_encode(size_t count, const char* const* names,
                              const kiln_buffer_view_t* const* values,
                              uint8_t** out, size_t* out_size);
/* The same with zip64 records even where plain zip would do (for tests;
 * kiln_npz_encode switches to zip64 by itself beyond 4 GiB or 65535 arrays). */
kiln_status_t kiln_npz_encode_zip64(size_t count, const char* const* names,
                                    const kiln_buffer_view_t* const* values,
                                    int force_zip64, uint8_t** out, size_t* out_size);
kiln_status_t kiln_npz_write_file(const char* path, size_t count,
                                  const char* const* names,
                                  const kiln_buffer_view_t* const* values);

/* CRC-32 (zip's and zlib's), continuing from `crc` (0 to start): the runtime's
 * own (src/checksum.c, which also checks .vmfb files), declared here for the
 * zip code. */
uint32_t kiln_crc32(uint32_t crc, const void* data, size_t size);

#ifdef __cplusplus
}
#endif

#endif
