/* What modules and contexts need from their instance. */
#ifndef KILN_INSTANCE_INTERNAL_H_
#define KILN_INSTANCE_INTERNAL_H_

#include "kiln/runtime.h"
#include "pool.h"

kiln_pool_t* kiln_instance_pool(kiln_instance_t* instance);
/* Whether loaded modules write their kernels to perf's map file. */
int kiln_instance_perf_map(const kiln_instance_t* instance);
/* Whether loaded modules register their kernels with GDB (gdb_jit.h). */
int kiln_instance_gdb_jit(const kiln_instance_t* instance);
/* The size of the CPU's last-level cache in KiB (0: unknown), given to every
 * kernel (kiln_dispatch_args_t.last_level_cache_kib): detected once when the
 * instance is created (Linux: sysfs), or $KILN_LAST_LEVEL_CACHE. */
uint32_t kiln_instance_last_level_cache_kib(const kiln_instance_t* instance);
/* "32768K", "2M", "4096" (bytes) as KiB; 0 for text that is no size. */
uint32_t kiln_parse_cache_size_kib(const char* text);

#endif
