/* The module container's checksum: CRC-32 as zlib computes it (ISO-HDLC:
 * reflected polynomial 0xEDB88320, initial value and final xor 0xFFFFFFFF),
 * in portable software (slicing-by-16: about 1.5-3 GB/s, no special
 * instructions). The .vmfb
 * trailer that carries it is described in docs/vm.md and vm/checksum.py. */
#ifndef KILN_CHECKSUM_H_
#define KILN_CHECKSUM_H_

#include <stddef.h>
#include <stdint.h>

/* The file ends in "KILNCSUM" | u32 algorithm | u32 checksum (little-endian);
 * the checksum covers every byte before it. */
#define KILN_TRAILER_SIZE 16
#define KILN_TRAILER_MAGIC "KILNCSUM"
#define KILN_CHECKSUM_CRC32 1u

/* CRC-32 of `size` bytes continuing from `crc` (0 to start):
 * kiln_crc32(kiln_crc32(0, a, n), b, m) == kiln_crc32(0, a || b, n + m).
 * kiln_crc32(0, "123456789", 9) == 0xCBF43926. Thread-safe. */
uint32_t kiln_crc32(uint32_t crc, const void* data, size_t size);

#endif
