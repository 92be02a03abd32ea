/* The module checksum (src/checksum.c): CRC-32 as zlib computes it. Known
 * check values, and agreement with a bit-at-a-time reference for every
 * length and alignment the table-driven loop distinguishes, in one call and
 * split into pieces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "test_util.h"

static uint32_t reference(const unsigned char* p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  size_t i;
  int k;
  for (i = 0; i < n; ++i) {
    crc ^= p[i];
    for (k = 0; k < 8; ++k) crc = (crc & 1u) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
  }
  return ~crc;
}

int main(void) {
  unsigned char buf[512 + 16];
  size_t offset, n, cut;
  uint64_t seed = 0x243F6A8885A308D3ull;
  CHECK(kiln_crc32(0, "", 0) == 0);
  CHECK(kiln_crc32(0, "123456789", 9) == 0xCBF43926u);
  CHECK(kiln_crc32(0, "The quick brown fox jumps over the lazy dog", 43) == 0x414FA339u);
  for (n = 0; n < sizeof buf; ++n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    buf[n] = (unsigned char)(seed >> 56);
  }
  for (offset = 0; offset < 16; ++offset) {
    for (n = 0; n + offset <= sizeof buf && n <= 300; ++n) {
      uint32_t want = reference(buf + offset, n);
      CHECK(kiln_crc32(0, buf + offset, n) == want);
      for (cut = 0; cut <= n; cut += 7)
        CHECK(kiln_crc32(kiln_crc32(0, buf + offset, cut), buf + offset + cut, n - cut) ==
              want);
    }
  }
  TEST_MAIN_END();
}
