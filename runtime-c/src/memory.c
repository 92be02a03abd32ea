/* Large allocations as anonymous mappings with transparent huge pages (memory.h). */
#include "memory.h"

#include <stdint.h>
#include <stdlib.h>

#include "kiln/constants.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
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
    /* Map 2 MiB more than needed, then unmap what lies before the first 2 MiB
     * boundary and past the end (rounded up to a page), so that the mapping
     * is exactly the record and the memory: the partial huge page at its end
     * is never a whole one inside the mapping, so the kernel backs it with
     * small pages (a huge one would be up to 2 MiB of memory nobody asked
     * for). A failed unmap of either end only leaves that end mapped. */
    long page_size = sysconf(_SC_PAGESIZE);
    size_t page = page_size > 0 && page_size <= (long)KILN_HUGE_PAGE_SIZE ? (size_t)page_size : 4096;
    size_t length, used;
    uintptr_t base, start, end;
    kiln_mapping_record_t* record;
    void* mem;
    if (size > SIZE_MAX - 2 * KILN_HUGE_PAGE_SIZE) return NULL;
    used = (KILN_RECORD_SIZE + size + page - 1) & ~(page - 1);
    length = used + KILN_HUGE_PAGE_SIZE - page; /* the boundary: at most 2 MiB - 1 page in */
    mem = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return NULL;
    base = (uintptr_t)mem;
    end = base + length;
    start = (base + KILN_HUGE_PAGE_SIZE - 1) & ~(uintptr_t)(KILN_HUGE_PAGE_SIZE - 1);
    if (start > base && munmap(mem, start - base) == 0) base = start;
    if (end > start + used && munmap((void*)(start + used), end - (start + used)) == 0)
      end = start + used;
    /* A hint: without transparent huge pages (EINVAL) the mapping is of small pages. */
    (void)madvise((void*)start, used, MADV_HUGEPAGE);
    record = (kiln_mapping_record_t*)start;
    record->base = (void*)base;
    record->length = end - base;
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
