/* The host CPU's features, by LLVM's names (the "+avx2,+fma" that kernel
 * images record). The names and how each is detected come from
 * schemas/cpu_features.toml (generated/cpu_features.h). */
#ifndef KILN_CPU_FEATURES_H_
#define KILN_CPU_FEATURES_H_

/* 1: the host has `name`; 0: it lacks it; -1: this runtime does not know the
 * name on this architecture (it cannot check it). Thread-safe. */
int kiln_host_has_feature(const char* name);

#endif
