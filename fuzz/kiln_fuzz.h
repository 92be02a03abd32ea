/* Shared by the kiln fuzz targets (fuzz_load.c, fuzz_invoke.c): the module
 * container (64-byte aligned copies, the checksum trailer), the
 * structure-aware mutator (LLVMFuzzerCustomMutator / CustomCrossOver, defined
 * in kiln_fuzz.c) and the kernel fingerprints that decide whether a mutated
 * module's native code may run. */
#ifndef KILN_FUZZ_H_
#define KILN_FUZZ_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/runtime.h"

/* A 64-byte aligned copy of `size` bytes (the generated flatbuffer readers
 * need that alignment); free() it. NULL when out of memory. */
uint8_t* kf_aligned_copy(const uint8_t* data, size_t size);

/* 1 when `data` ends in the "KILNCSUM" trailer magic. */
int kf_has_trailer(const uint8_t* data, size_t size);

/* Recomputes the trailer's CRC-32 when there is a trailer (docs/vm.md). */
void kf_reseal(uint8_t* data, size_t size);

/* The verified Module table of a 64-byte aligned module file (trailer or
 * not), or NULL when the flatbuffer does not verify. */
const uint8_t* kf_verified_root(const uint8_t* aligned, size_t size);

/* Adds a trusted seed module (its bytes are copied). Returns 0 when the
 * module's flatbuffer does not verify (it is not kept). */
int kf_seed_add(const uint8_t* data, size_t size);
/* Adds every *.vmfb file of `dir` that `accept` (when not NULL) accepts;
 * returns how many were kept, -1 when the directory cannot be read. */
int kf_seed_add_dir(const char* dir, int (*accept)(const uint8_t* data, size_t size));
size_t kf_seed_count(void);

/* 1 when the native code of `root` (a verified Module table) is that of a
 * seed: the same kernel images (code, text size, segment alignment,
 * relocations, entry points) and kernels whose contract with that code is at
 * least as strict as the seed's (same image and entry offset, same bindings
 * with the same writable flags, each read-only binding at least as large and
 * each written one exactly as large, at least as many push constants, at
 * most as many workgroups). Native code is trusted, so only such modules may
 * have their functions called. */
int kf_native_code_is_trusted(const uint8_t* root);

/* The most ref or int registers any function of `root` declares. */
uint32_t kf_max_registers(const uint8_t* root);

/* What the mutator aims at: KF_PROFILE_LOAD (the default) spreads mutations
 * over the container and every table, 20% of them by libFuzzer's generic
 * mutator; KF_PROFILE_INVOKE mostly rewrites bytecode and types (4% generic),
 * so that more mutants still load and run. */
typedef enum kf_profile { KF_PROFILE_LOAD, KF_PROFILE_INVOKE } kf_profile_t;
void kf_set_profile(kf_profile_t profile);

/* libFuzzer's default mutator (defined by libFuzzer). */
size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

#endif
