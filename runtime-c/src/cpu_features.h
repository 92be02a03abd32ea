/* The host CPU's features, by LLVM's names (the "+avx2,+fma" that kernel
 * images record). The names and how each is detected come from
 * schemas/cpu_features.toml (generated/cpu_features.h). */
#ifndef KILN_CPU_FEATURES_H_
#define KILN_CPU_FEATURES_H_

/* 1: the host has `name`; 0: it lacks it; -1: this runtime does not know the
 * name on this architecture (it cannot check it). Thread-safe. A name listed
 * in $KILN_HIDE_CPU_FEATURES (comma-separated, a testing aid) is answered 0. */
int kiln_host_has_feature(const char* name);

/* 0 when `name` does not gate loading (schemas/cpu_features.toml's
 * gates_load = false: it adds no instruction kiln's kernels use), so an image
 * recording it loads on a host that lacks it; 1 otherwise (unknown names too). */
int kiln_feature_gates_load(const char* name);

#endif
