/* Kernel images: linked native code loaded from a module's bytes.
 *
 * The exporter links each object file into one position-independent blob:
 *   [0, text_size)         code, mapped read+execute
 *   [text_size, code_size) read-only data, mapped read-only
 * text_size is a multiple of segment_align. After copying the blob into fresh
 * pages, the loader applies each relocation (offset, addend) by writing the
 * 64-bit value (image_base + addend) at image_base + offset, then makes the
 * pages executable or read-only: never writable and executable at once.
 * No dlopen, no temp files. */
#ifndef KILN_KERNEL_IMAGE_H_
#define KILN_KERNEL_IMAGE_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/kernel_abi.h"
#include "kiln/runtime.h"

typedef struct kiln_kernel_image kiln_kernel_image_t;

/* `relocs` points at reloc_count little-endian {uint64 offset; int64 addend}
 * pairs (16 bytes each, possibly unaligned). Every offset+8 and addend is
 * checked against code_size. */
kiln_status_t kiln_kernel_image_load(const uint8_t* code, size_t code_size,
                                     size_t text_size, size_t segment_align,
                                     const uint8_t* relocs, size_t reloc_count,
                                     kiln_kernel_image_t** out);
void kiln_kernel_image_free(kiln_kernel_image_t* image);

/* Entry point at `offset` into the text segment; NULL if out of range. */
kiln_kernel_fn_t kiln_kernel_image_entry(const kiln_kernel_image_t* image,
                                         uint64_t offset);

/* True when this host can run code for `target_triple` with the
 * comma-separated `cpu_features` ("+avx2,+fma"); on false, writes a reason. */
int kiln_host_supports(const char* target_triple, const char* cpu_features,
                       char* reason, size_t reason_size);

#endif
