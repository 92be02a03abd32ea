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

#endif
