/* Large allocations as anonymous mappings with transparent huge pages (memory.h). */
#include "memory.h"

#include <stdint.h>
#include <stdlib.h>

#include "kiln/constants.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__linux__) && defined(MADV_HUGEPAGE)
#define KILN_HAVE_HUGE_MAPPINGS 1
#else
#define KILN_HAVE_HUGE_MAPPINGS 0
#endif

/* At the huge-page boundary, just before the memory: what munmap needs. */
typedef struct kiln_mapping_record {
  void* base;
  size_t length;
} kiln_mapping_record_t;

#define KILN_RECORD_SIZE ((size_t)KILN_BUFFER_ALIGNMENT)
_Static_assert(sizeof(kiln_mapping_record_t) <= KILN_RECORD_SIZE, "the record fits its block");

int kiln_memory_is_mapped(size_t size, size_t min) {
  return KILN_HAVE_HUGE_MAPPINGS && size >= min;
}

void* kiln_memory_alloc(size_t size, int mapped) {
#if KILN_HAVE_HUGE_MAPPINGS
  if (mapped) {
    /* mmap returns page-aligned memory (pages are at least 4 KiB), so the first
     * 2 MiB boundary lies at most 2 MiB - 4 KiB past it. */
    const size_t slack = KILN_HUGE_PAGE_SIZE - 4096 + KILN_RECORD_SIZE;
    size_t length;
    void* base;
    uintptr_t start;
    kiln_mapping_record_t* record;
    if (size > SIZE_MAX - slack) return NULL;
    length = size + slack;
    base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    start = ((uintptr_t)base + KILN_HUGE_PAGE_SIZE - 1) & ~(uintptr_t)(KILN_HUGE_PAGE_SIZE - 1);
    /* A hint, from the boundary on (nothing before it is ever touched): without
     * transparent huge pages (EINVAL) the mapping is of small pages. */
    (void)madvise((void*)start, length - (start - (uintptr_t)base), MADV_HUGEPAGE);
    record = (kiln_mapping_record_t*)start;
    record->base = base;
    record->length = length;
    return (char*)start + KILN_RECORD_SIZE;
  }
#else
  (void)mapped;
#endif
  /* aligned_alloc wants a multiple of the alignment. */
  if (size > SIZE_MAX - KILN_BUFFER_ALIGNMENT) return NULL;
  return aligned_alloc(KILN_BUFFER_ALIGNMENT,
                       (size + KILN_BUFFER_ALIGNMENT - 1) & ~(size_t)(KILN_BUFFER_ALIGNMENT - 1));
}

void kiln_memory_free(void* p, int mapped) {
  if (!p) return;
#if KILN_HAVE_HUGE_MAPPINGS
  if (mapped) {
    const kiln_mapping_record_t* record =
        (const kiln_mapping_record_t*)((char*)p - KILN_RECORD_SIZE);
    (void)munmap(record->base, record->length);
    return;
  }
#else
  (void)mapped;
#endif
  free(p);
}
