/* The runtime's large allocations: anonymous mappings with transparent huge pages.
 *
 * Fresh memory costs a page fault per page on its first write. For a 64 MiB
 * buffer that is 16,384 faults of 4 KiB (about 80 ms on the development
 * machine); as 2 MiB transparent huge pages it is 32 (about 10 ms, the kernel
 * zeroing the pages). So an allocation from KILN_MAPPED_BUFFER_MIN (a buffer
 * view) or KILN_MAPPED_ARENA_MIN (a context's transient arena) bytes up is an
 * anonymous mapping of its own, starting on a 2 MiB boundary and advised
 * MADV_HUGEPAGE (which the kernel follows when
 * /sys/kernel/mm/transparent_hugepage/enabled is `always` or `madvise`; with
 * `never` it is an ordinary mapping of 4 KiB pages). Smaller allocations, and
 * every allocation on a platform without MADV_HUGEPAGE, come from
 * aligned_alloc.
 *
 * Buffers from 32 MiB up only: glibc maps those afresh on every allocation
 * anyway (its largest mmap threshold), so a steady-state call that frees and
 * allocates such a buffer faults in fresh memory either way (now in huge
 * pages), while smaller freed buffers stay in glibc's heap and a later call
 * reuses their pages without faults. A context's arena is allocated once
 * and kept, so it is mapped from one huge page up. */
#ifndef KILN_MEMORY_H_
#define KILN_MEMORY_H_

#include <stddef.h>

#define KILN_HUGE_PAGE_SIZE ((size_t)2 << 20)
#define KILN_MAPPED_BUFFER_MIN ((size_t)32 << 20)
#define KILN_MAPPED_ARENA_MIN KILN_HUGE_PAGE_SIZE

/* 1 when an allocation of `size` bytes with threshold `min` is a mapping
 * (kiln_memory_alloc's `mapped`): size >= min on a platform with
 * MADV_HUGEPAGE, else 0. */
int kiln_memory_is_mapped(size_t size, size_t min);

/* `size` bytes (not zeroed; size > 0), aligned to KILN_BUFFER_ALIGNMENT; NULL
 * when the memory cannot be had. mapped != 0 (kiln_memory_is_mapped): an
 * anonymous mapping (mmap) that starts on a 2 MiB boundary with a 64-byte
 * record of the mapping, then the memory (64 bytes past the boundary), and
 * ends at the page that holds the memory's last byte (mapped with 2 MiB of
 * slack, whose ends are then unmapped), so that no whole huge page lies past
 * the memory; else aligned_alloc. */
void* kiln_memory_alloc(size_t size, int mapped);

/* Frees what kiln_memory_alloc(size, mapped) returned, with the same
 * `mapped` (munmap or free); NULL does nothing. */
void kiln_memory_free(void* p, int mapped);

#endif
