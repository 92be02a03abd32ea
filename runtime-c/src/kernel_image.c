/* Kernel images: copy a module's linked native code into fresh pages, apply
 * its absolute relocations, then make text read+execute and rodata read-only
 * (W^X: never writable and executable at once). No dlopen, no temp files. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_features.h"
#include "kernel_image.h"
#include "status_internal.h"

struct kiln_kernel_image {
  uint8_t* base;
  size_t mapped_size;
  size_t code_size;
  size_t text_size;
};

static uint64_t kiln_read_u64le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

static void kiln_write_u64_native(uint8_t* p, uint64_t v) { memcpy(p, &v, 8); }

kiln_status_t kiln_kernel_image_load(const uint8_t* code, size_t code_size,
                                     size_t text_size, size_t segment_align,
                                     const uint8_t* relocs, size_t reloc_count,
                                     kiln_kernel_image_t** out) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (code_size == 0 || !code) {
    return kiln_make_status(KILN_DATA_LOSS, "kernel image is empty");
  }
  if (segment_align == 0 || (segment_align & (segment_align - 1)) != 0) {
    return kiln_make_status(KILN_DATA_LOSS,
                            "kernel image segment_align %zu is not a power of two",
                            segment_align);
  }
  if (text_size > code_size) {
    return kiln_make_status(KILN_DATA_LOSS,
                            "kernel image text_size %zu exceeds its code size %zu",
                            text_size, code_size);
  }
  if (text_size % segment_align != 0) {
    return kiln_make_status(KILN_DATA_LOSS,
                            "kernel image text_size %zu is not a multiple of "
                            "segment_align %zu",
                            text_size, segment_align);
  }
  if (reloc_count > 0 && !relocs) {
    return kiln_make_status(KILN_DATA_LOSS, "kernel image relocation table is missing");
  }
  /* Check every relocation before touching memory. */
  for (size_t i = 0; i < reloc_count; ++i) {
    uint64_t offset = kiln_read_u64le(relocs + 16 * i);
    int64_t addend = (int64_t)kiln_read_u64le(relocs + 16 * i + 8);
    if (code_size < 8 || offset > (uint64_t)code_size - 8) {
      return kiln_make_status(KILN_DATA_LOSS,
                              "kernel image relocation %zu: offset %llu + 8 "
                              "exceeds the code size %zu",
                              i, (unsigned long long)offset, code_size);
    }
    if (addend < 0 || (uint64_t)addend > (uint64_t)code_size) {
      return kiln_make_status(KILN_DATA_LOSS,
                              "kernel image relocation %zu: addend %lld is "
                              "outside the image [0, %zu]",
                              i, (long long)addend, code_size);
    }
  }

  long page_long = sysconf(_SC_PAGESIZE);
  size_t page = page_long > 0 ? (size_t)page_long : 4096;
  if (code_size > SIZE_MAX - page) {
    return kiln_make_status(KILN_DATA_LOSS, "kernel image size %zu is too large",
                            code_size);
  }
  size_t mapped_size = (code_size + page - 1) / page * page;
  void* mem = mmap(NULL, mapped_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    return kiln_make_status(KILN_OUT_OF_MEMORY,
                            "cannot map %zu bytes for a kernel image", mapped_size);
  }
  uint8_t* base = mem;
  memcpy(base, code, code_size);
  for (size_t i = 0; i < reloc_count; ++i) {
    uint64_t offset = kiln_read_u64le(relocs + 16 * i);
    int64_t addend = (int64_t)kiln_read_u64le(relocs + 16 * i + 8);
    kiln_write_u64_native(base + offset, (uint64_t)(uintptr_t)base + (uint64_t)addend);
  }

  int rc = 0;
  if (page <= segment_align) {
    /* text_size is a multiple of segment_align, hence of the page size. */
    if (text_size > 0) rc = mprotect(base, text_size, PROT_READ | PROT_EXEC);
    if (rc == 0 && mapped_size > text_size) {
      rc = mprotect(base + text_size, mapped_size - text_size, PROT_READ);
    }
  } else {
    /* Segments share pages: the whole image is read+execute (never writable). */
    rc = mprotect(base, mapped_size, PROT_READ | PROT_EXEC);
  }
  if (rc != 0) {
    munmap(base, mapped_size);
    return kiln_make_status(KILN_FAILED_PRECONDITION,
                            "cannot make a kernel image executable (mprotect "
                            "failed; is W^X memory allowed here?)");
  }
  if (text_size > 0) {
    __builtin___clear_cache((char*)base, (char*)base + text_size);
  }

  kiln_kernel_image_t* image = malloc(sizeof(*image));
  if (!image) {
    munmap(base, mapped_size);
    return kiln_make_status(KILN_OUT_OF_MEMORY, "cannot allocate a kernel image");
  }
  image->base = base;
  image->mapped_size = mapped_size;
  image->code_size = code_size;
  image->text_size = text_size;
  *out = image;
  return NULL;
}

void kiln_kernel_image_free(kiln_kernel_image_t* image) {
  if (!image) return;
  munmap(image->base, image->mapped_size);
  free(image);
}

kiln_kernel_fn_t kiln_kernel_image_entry(const kiln_kernel_image_t* image,
                                         uint64_t offset) {
  if (!image || offset >= image->text_size) return NULL;
  kiln_kernel_fn_t fn;
  void* address = image->base + offset;
  /* Object pointer to function pointer: POSIX guarantees this works. */
  memcpy(&fn, &address, sizeof(fn));
  return fn;
}

/* ---- host support ------------------------------------------------------ */

static void kiln_reason(char* reason, size_t reason_size, const char* format,
                        const char* a, const char* b) {
  if (reason && reason_size) snprintf(reason, reason_size, format, a, b);
}

#if defined(__x86_64__)
#define KILN_HOST_ARCH "x86_64"
#elif defined(__aarch64__)
#define KILN_HOST_ARCH "aarch64"
#elif defined(__riscv) && __riscv_xlen == 64
#define KILN_HOST_ARCH "riscv64"
#else
#define KILN_HOST_ARCH "unknown"
#endif

/* The canonical architecture of a triple's first component. */
static const char* kiln_canonical_arch(const char* arch, size_t len) {
  static const struct { const char* name; const char* canonical; } names[] = {
      {"x86_64", "x86_64"}, {"amd64", "x86_64"}, {"x86-64", "x86_64"},
      {"aarch64", "aarch64"}, {"arm64", "aarch64"}, {"riscv64", "riscv64"},
  };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    if (strlen(names[i].name) == len && strncmp(arch, names[i].name, len) == 0) {
      return names[i].canonical;
    }
  }
  return NULL;
}

int kiln_host_supports(const char* target_triple, const char* cpu_features,
                       char* reason, size_t reason_size) {
  if (reason && reason_size) reason[0] = '\0';
  if (!target_triple || !*target_triple) {
    kiln_reason(reason, reason_size, "kernel image has no target triple%s%s", "", "");
    return 0;
  }
  size_t arch_len = strcspn(target_triple, "-");
  const char* arch = kiln_canonical_arch(target_triple, arch_len);
  if (!arch || strcmp(arch, KILN_HOST_ARCH) != 0) {
    char got[64];
    snprintf(got, sizeof(got), "%.*s", (int)(arch_len < 60 ? arch_len : 60),
             target_triple);
    kiln_reason(reason, reason_size,
                "kernel image targets architecture '%s' but this host is '%s'",
                got, KILN_HOST_ARCH);
    return 0;
  }
#if !defined(_WIN32)
  if (strstr(target_triple, "windows") || strstr(target_triple, "win32")) {
    kiln_reason(reason, reason_size,
                "kernel image targets '%s' (Windows calling convention) but "
                "this host is %s",
                target_triple, "not Windows");
    return 0;
  }
#endif
  const char* p = cpu_features ? cpu_features : "";
  while (*p) {
    size_t len = strcspn(p, ",");
    char feature[64];
    if (len > 0) {
      char sign = p[0];
      const char* name = p;
      size_t name_len = len;
      if (sign == '+' || sign == '-') {
        name++;
        name_len--;
      }
      /* Disabled features ('-x') never stop an image from running. */
      if (sign != '-' && name_len > 0) {
        if (name_len >= sizeof(feature)) {
          snprintf(feature, sizeof(feature), "%.*s...", 40, name);
          kiln_reason(reason, reason_size,
                      "kernel image requires unknown CPU feature '+%s' "
                      "(target %s)", feature, target_triple);
          return 0;
        }
        memcpy(feature, name, name_len);
        feature[name_len] = '\0';
        int has = kiln_host_has_feature(feature);
        if (has < 0) {
          kiln_reason(reason, reason_size,
                      "kernel image requires unknown CPU feature '+%s' (target "
                      "%s): this runtime cannot check it on the host",
                      feature, target_triple);
          return 0;
        }
        /* A feature that adds no instruction kiln's kernels use (gates_load =
         * false) is recorded but not required: qemu and some kernels hide them. */
        if (has == 0 && kiln_feature_gates_load(feature)) {
          kiln_reason(reason, reason_size,
                      "kernel image requires CPU feature '+%s' which this host "
                      "CPU lacks (target %s)",
                      feature, target_triple);
          return 0;
        }
      }
    }
    p += len;
    if (*p == ',') p++;
  }
  return 1;
}
