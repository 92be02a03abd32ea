/* Module loading: map or copy the file, check its checksum, identifier and
 * version, verify every table and every function's bytecode, load kernel
 * images, and answer reflection queries. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/fs.h>
#include <sys/vfs.h>
#endif

#include "buffer_internal.h"
#include "checksum.h"
#include "generated/module_fb.h"
#include "instance_internal.h"
#include "kernel_image.h"
#include "gdb_jit.h"
#include "module_internal.h"
#include "status_internal.h"

#define CORRUPT(...) kiln_make_status(KILN_DATA_LOSS, __VA_ARGS__)

/* statfs f_type of the read-only file system images (linux/magic.h). */
#define KILN_SQUASHFS_MAGIC 0x73717368u
#define KILN_EROFS_MAGIC 0xE0F5E1E2u

void kiln_format_type_info(const kiln_type_info_t* type, char* buf, size_t size) {
  kiln_format_type(type->dtype, type->rank, type->shape, buf, size);
}

static void module_destroy(kiln_module_t* m) {
  uint32_t i;
  if (!m) return;
  if (m->functions) {
    for (i = 0; i < m->function_count; ++i) {
      free(m->functions[i].args);
      free(m->functions[i].results);
      free(m->functions[i].arg_types);
      free(m->functions[i].result_types);
    }
  }
  if (m->kernels) {
    for (i = 0; i < m->kernel_count; ++i) {
      free(m->kernels[i].binding_sizes);
      free(m->kernels[i].binding_writable);
    }
  }
  kiln_gdb_jit_unregister_module(m->gdb_jit); /* before the code it names goes */
  if (m->images) {
    for (i = 0; i < m->image_count; ++i) kiln_kernel_image_free(m->images[i]);
  }
  free(m->types);
  free(m->functions);
  free(m->exports);
  free(m->globals);
  free(m->constants);
  free(m->images);
  free(m->image_tables);
  free(m->image_variants);
  free(m->image_entries);
  free(m->kernels);
  if (m->mapping) munmap(m->mapping, m->mapping_size);
  free(m->owned);
  kiln_instance_release(m->instance);
  free(m);
}

/* calloc of n elements that treats n == 0 as success with a NULL result. */
static int alloc_array(void** out, size_t n, size_t elem) {
  *out = n ? calloc(n, elem) : NULL;
  return n == 0 || *out != NULL;
}

#define ALLOC(ptr, n, what)                                                      \
  do {                                                                           \
    if (!alloc_array((void**)&(ptr), (n), sizeof *(ptr)))                        \
      return kiln_make_status(KILN_OUT_OF_MEMORY, "allocating %zu %s",          \
                              (size_t)(n), (what));                              \
  } while (0)

/* Reads the identifier and the version, checking only what that needs. */
static kiln_status_t check_header(kiln_module_t* m) {
  kiln_fb_verifier_t v;
  kiln_fb__table_t t = {0, 0, 0, 0};
  uint64_t at = 0;
  int present = 0;
  uint32_t root;
  if (m->size < 8)
    return CORRUPT("not a kiln module: %zu bytes is too short for a module header",
                   m->size);
  if (memcmp(m->data + 4, KILN_FB_FILE_IDENTIFIER, 4) != 0) {
    char got[5];
    int k;
    for (k = 0; k < 4; ++k) {
      unsigned char c = m->data[4 + k];
      got[k] = (c >= 32 && c < 127) ? (char)c : '?';
    }
    got[4] = 0;
    return CORRUPT("not a kiln module: file identifier is '%s', expected '%s'", got,
                   KILN_FB_FILE_IDENTIFIER);
  }
  memset(&v, 0, sizeof v);
  v.buf = m->data;
  v.size = m->size;
  v.table_budget = 1;
  kiln_fb__push(&v, "Module");
  root = kiln_fb__u32(m->data);
  if (root >= m->size || !kiln_fb__verify_table(&v, root, &t))
    return CORRUPT("corrupt module header: %s",
                   v.error[0] ? v.error : "root offset outside the file");
  m->version_major = m->version_minor = 0;
  if (!kiln_fb__verify_field(&v, &t, 0, 2, 2, &at, &present))
    return CORRUPT("corrupt module header: %s", v.error);
  if (present) m->version_major = kiln_fb__u16(m->data + at);
  if (!kiln_fb__verify_field(&v, &t, 1, 2, 2, &at, &present))
    return CORRUPT("corrupt module header: %s", v.error);
  if (present) m->version_minor = kiln_fb__u16(m->data + at);
  if (m->version_major != KILN_MODULE_VERSION_MAJOR)
    return kiln_make_status(KILN_UNIMPLEMENTED,
                            "module format version %u.%u is not supported (this runtime "
                            "reads %d.x)", (unsigned)m->version_major,
                            (unsigned)m->version_minor, KILN_MODULE_VERSION_MAJOR);
  return NULL;
}

/* The container: [flatbuffer | "KILNCSUM" | u32 algorithm | u32 checksum].
 * When the trailer is there with a known algorithm its checksum is checked
 * before anything else is read, so that damage anywhere (kernel code
 * included) is reported as such; then the identifier and the version (an
 * unknown major version is refused even when the rest of the file means
 * something else to a newer runtime); then the trailer must have been there.
 * On success m->size is the flatbuffer's size. */
static kiln_status_t check_container(kiln_module_t* m) {
  const size_t n = KILN_TRAILER_SIZE;
  int trailer = m->size >= n && memcmp(m->data + m->size - n, KILN_TRAILER_MAGIC, 8) == 0;
  uint32_t algorithm = 0;
  kiln_status_t s;
  if (trailer) {
    uint32_t stored = kiln_fb__u32(m->data + m->size - 4);
    algorithm = kiln_fb__u32(m->data + m->size - 8);
    if (algorithm == KILN_CHECKSUM_CRC32) {
      uint32_t computed = kiln_crc32(0, m->data, m->size - 4);
      if (computed != stored)
        return CORRUPT("module checksum mismatch: stored 0x%08x, computed 0x%08x (the "
                       "file is damaged)", (unsigned)stored, (unsigned)computed);
    }
    m->size -= n;
  }
  if ((s = check_header(m))) return s;
  if (!trailer)
    return CORRUPT("module checksum trailer is missing: the last %zu bytes do not start "
                   "with '%s' (the file is truncated or damaged)", n, KILN_TRAILER_MAGIC);
  if (algorithm != KILN_CHECKSUM_CRC32)
    return CORRUPT("module checksum trailer names unknown algorithm %u (format %d.x "
                   "uses %u, CRC-32: the file is damaged)", (unsigned)algorithm,
                   KILN_MODULE_VERSION_MAJOR, KILN_CHECKSUM_CRC32);
  return NULL;
}

/* 1 when `s` is valid UTF-8 (no overlong forms, surrogates or code points
 * past U+10FFFF); else 0 with the offset of the first bad byte. */
static int utf8_valid(const char* text, size_t* bad) {
  const unsigned char* s = (const unsigned char*)text;
  size_t i = 0;
  while (s[i]) {
    unsigned c = s[i], len, k;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else break;
    for (k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) break; /* also stops at the terminating NUL */
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (k < len || (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      break;
    i += len;
  }
  *bad = i;
  return s[i] == 0;
}

/* DATA_LOSS unless `text` (a name or other string from the module) is UTF-8. */
static kiln_status_t check_text(const char* text, const char* what, unsigned index,
                                const char* field) {
  size_t bad;
  if (utf8_valid(text, &bad)) return NULL;
  return CORRUPT("%s %u: %s is not valid UTF-8 (byte 0x%02x at offset %zu)", what, index,
                 field, (unsigned)(unsigned char)text[bad], bad);
}

static kiln_status_t decode_types(kiln_module_t* m, const uint8_t* root) {
  uint32_t i, d;
  m->type_count = kiln_fb_Module_types_len(root);
  ALLOC(m->types, m->type_count, "types");
  for (i = 0; i < m->type_count; ++i) {
    const uint8_t* t = kiln_fb_Module_types_at(root, i);
    kiln_type_info_t* ti = &m->types[i];
    int8_t dtype = kiln_fb_TensorType_dtype(t);
    if (dtype < 0 || dtype >= KILN_DTYPE_COUNT)
      return CORRUPT("type %u: unknown dtype code %d", (unsigned)i, (int)dtype);
    ti->dtype = (kiln_dtype_t)dtype;
    ti->rank = kiln_fb_TensorType_shape_len(t);
    ti->shape = ti->rank ? kiln_fb_TensorType_shape(t) : NULL;
    if (ti->rank > KILN_MAX_RANK)
      return CORRUPT("type %u: rank %zu exceeds the maximum %d", (unsigned)i, ti->rank,
                     KILN_MAX_RANK);
    for (d = 0; d < ti->rank; ++d)
      if (ti->shape[d] < 0)
        return CORRUPT("type %u: dimension %u is negative (%lld)", (unsigned)i,
                       (unsigned)d, (long long)ti->shape[d]);
    if (kiln_compute_byte_size(ti->dtype, ti->rank, ti->shape, &ti->byte_size) != 0)
      return CORRUPT("type %u: byte size overflows", (unsigned)i);
  }
  return NULL;
}

static kiln_status_t type_index(const kiln_module_t* m, uint32_t index, const char* what,
                                const char* name, uint32_t pos) {
  if (index >= m->type_count)
    return CORRUPT("%s %u '%s': type index %u out of range (%u types)", what,
                   (unsigned)pos, name, (unsigned)index, (unsigned)m->type_count);
  return NULL;
}

static void fill_value(const kiln_module_t* m, kiln_value_info_t* out, const char* name,
                       uint32_t type) {
  out->name = name;
  out->dtype = m->types[type].dtype;
  out->rank = m->types[type].rank;
  out->shape = m->types[type].shape;
  out->is_mutable = 0;
}

static kiln_status_t decode_values(kiln_module_t* m, const uint8_t* fn, int results,
                                   uint32_t* count, kiln_value_info_t** infos,
                                   uint32_t** types) {
  uint32_t i;
  kiln_status_t s;
  *count = results ? kiln_fb_Function_results_len(fn) : kiln_fb_Function_args_len(fn);
  ALLOC(*infos, *count, "values");
  ALLOC(*types, *count, "values");
  for (i = 0; i < *count; ++i) {
    const uint8_t* v = results ? kiln_fb_Function_results_at(fn, i)
                               : kiln_fb_Function_args_at(fn, i);
    uint32_t t = kiln_fb_Value_type(v);
    if ((s = check_text(kiln_fb_Value_name(v), results ? "result" : "argument", i, "name")))
      return kiln_status_annotate(s, "function '%s'", kiln_fb_Function_name(fn));
    if ((s = type_index(m, t, results ? "result" : "argument", kiln_fb_Value_name(v), i)))
      return kiln_status_annotate(s, "function '%s'", kiln_fb_Function_name(fn));
    (*types)[i] = t;
    fill_value(m, &(*infos)[i], kiln_fb_Value_name(v), t);
  }
  return NULL;
}

static kiln_status_t decode_functions(kiln_module_t* m, const uint8_t* root) {
  uint32_t i, n = 0;
  kiln_status_t s;
  m->function_count = kiln_fb_Module_functions_len(root);
  ALLOC(m->functions, m->function_count, "functions");
  for (i = 0; i < m->function_count; ++i) {
    const uint8_t* fn = kiln_fb_Module_functions_at(root, i);
    kiln_function_info_t* f = &m->functions[i];
    f->name = kiln_fb_Function_name(fn);
    f->exported = kiln_fb_Function_exported(fn) != 0;
    if ((s = check_text(f->name, "function", i, "name")) ||
        (s = check_text(kiln_fb_Function_arg_tree(fn), "function", i, "arg_tree")) ||
        (s = check_text(kiln_fb_Function_result_tree(fn), "function", i, "result_tree")))
      return s;
    if ((s = decode_values(m, fn, 0, &f->arg_count, &f->args, &f->arg_types))) return s;
    if ((s = decode_values(m, fn, 1, &f->result_count, &f->results, &f->result_types)))
      return s;
    f->arg_tree = kiln_fb_Function_arg_tree(fn);
    f->result_tree = kiln_fb_Function_result_tree(fn);
    f->ref_count = kiln_fb_Function_ref_register_count(fn);
    f->i64_count = kiln_fb_Function_i64_register_count(fn);
    f->code = kiln_fb_Function_code(fn);
    f->code_len = kiln_fb_Function_code_len(fn);
    f->transient_size = kiln_fb_Function_transient_size(fn);
    if (f->transient_size % KILN_BUFFER_ALIGNMENT || f->transient_size > SIZE_MAX / 2)
      return CORRUPT("function '%s': transient_size %llu is not a multiple of %u below %zu",
                     f->name, (unsigned long long)f->transient_size,
                     (unsigned)KILN_BUFFER_ALIGNMENT, (size_t)(SIZE_MAX / 2));
    if (f->exported) n++;
  }
  m->export_count = n;
  ALLOC(m->exports, n, "exports");
  for (i = 0, n = 0; i < m->function_count; ++i)
    if (m->functions[i].exported) m->exports[n++] = i;
  return NULL;
}

static kiln_status_t decode_data(kiln_module_t* m, const uint8_t* root) {
  uint32_t i;
  kiln_status_t s;
  m->global_count = kiln_fb_Module_globals_len(root);
  ALLOC(m->globals, m->global_count, "globals");
  for (i = 0; i < m->global_count; ++i) {
    const uint8_t* g = kiln_fb_Module_globals_at(root, i);
    kiln_global_info_t* gi = &m->globals[i];
    const char* name = kiln_fb_Global_name(g);
    uint32_t len = kiln_fb_Global_data_len(g);
    if ((s = check_text(name, "global", i, "name"))) return s;
    gi->type = kiln_fb_Global_type(g);
    if ((s = type_index(m, gi->type, "global", name, i))) return s;
    fill_value(m, &gi->info, name, gi->type);
    gi->info.is_mutable = kiln_fb_Global_mutable(g) != 0;
    if (kiln_fb_Global_zero_init(g)) {
      if (len != 0)
        return CORRUPT("global %u '%s' is zero-initialized but carries %u bytes of data",
                       (unsigned)i, name, (unsigned)len);
      gi->data = NULL;
    } else {
      if (len != m->types[gi->type].byte_size)
        return CORRUPT("global %u '%s': initial data is %u bytes, its type needs %zu",
                       (unsigned)i, name, (unsigned)len, m->types[gi->type].byte_size);
      gi->data = kiln_fb_Global_data(g);
    }
  }
  m->constant_count = kiln_fb_Module_constants_len(root);
  ALLOC(m->constants, m->constant_count, "constants");
  for (i = 0; i < m->constant_count; ++i) {
    const uint8_t* c = kiln_fb_Module_constants_at(root, i);
    uint32_t len = kiln_fb_Constant_data_len(c);
    m->constants[i].type = kiln_fb_Constant_type(c);
    if ((s = type_index(m, m->constants[i].type, "constant", "", i))) return s;
    if (len != m->types[m->constants[i].type].byte_size)
      return CORRUPT("constant %u: data is %u bytes, its type needs %zu", (unsigned)i,
                     (unsigned)len, m->types[m->constants[i].type].byte_size);
    m->constants[i].data = kiln_fb_Constant_data(c);
  }
  return NULL;
}

/* Whether `entry` is one of the (strictly increasing) entry points of the
 * KernelImage table `img`. */
static int is_entry_point(const uint8_t* img, uint64_t entry) {
  const uint64_t* entries = kiln_fb_KernelImage_entry_points(img);
  uint32_t lo = 0, hi = kiln_fb_KernelImage_entry_points_len(img);
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (entries[mid] == entry) return 1;
    if (entries[mid] < entry) lo = mid + 1;
    else hi = mid;
  }
  return 0;
}

/* The variant name of a KernelImage table, for messages ("" when none). */
static const char* variant_name(const uint8_t* img) {
  const char* name = kiln_fb_KernelImage_variant(img);
  return name ? name : "";
}

/* Checks every kernel variant's table (format 2.4): its base image index, its
 * image, and one entry offset per kernel of the base image. */
static kiln_status_t check_variants(const uint8_t* root) {
  uint32_t images = kiln_fb_Module_kernel_images_len(root);
  uint32_t v, k, variant_count = kiln_fb_Module_kernel_variants_len(root);
  for (v = 0; v < variant_count; ++v) {
    const uint8_t* var = kiln_fb_Module_kernel_variants_at(root, v);
    uint32_t base = kiln_fb_KernelVariant_base(var), kernels_of_base = 0;
    if (base >= images)
      return CORRUPT("kernel variant %u: base image %u out of range (%u images)", (unsigned)v,
                     (unsigned)base, (unsigned)images);
    if (!kiln_fb_KernelVariant_image(var))
      return CORRUPT("kernel variant %u has no image", (unsigned)v);
    for (k = 0; k < kiln_fb_Module_kernels_len(root); ++k)
      if (kiln_fb_Kernel_image(kiln_fb_Module_kernels_at(root, k)) == base) kernels_of_base++;
    if (kiln_fb_KernelVariant_entry_offsets_len(var) != kernels_of_base)
      return CORRUPT("kernel variant %u: %u entry offsets, image %u has %u kernels", (unsigned)v,
                     (unsigned)kiln_fb_KernelVariant_entry_offsets_len(var), (unsigned)base,
                     (unsigned)kernels_of_base);
  }
  return NULL;
}

/* Chooses which build of kernel image `i` to load (format 2.4): the first of
 * its Module.kernel_variants (best first) the host supports, else the image
 * itself; or the build KILN_CPU_VARIANT names. Sets m->image_tables[i],
 * m->image_variants[i] and m->image_entries[i]. */
static kiln_status_t choose_variant(kiln_module_t* m, const uint8_t* root, uint32_t i) {
  const uint8_t* base = kiln_fb_Module_kernel_images_at(root, i);
  uint32_t v, variant_count = kiln_fb_Module_kernel_variants_len(root);
  uint32_t candidates = 0;
  const char* forced = getenv("KILN_CPU_VARIANT");
  char reason[256], names[256];
  kiln_status_t s;
  size_t used = 0;
  if (forced && !*forced) forced = NULL;
  names[0] = 0;
  /* Candidates in order: the variants of image i, then the image itself (v == variant_count). */
  for (v = 0; v <= variant_count; ++v) {
    const uint8_t* img = base;
    const uint64_t* entries = NULL;
    if (v < variant_count) { /* check_variants checked every variant's table */
      const uint8_t* var = kiln_fb_Module_kernel_variants_at(root, v);
      if (kiln_fb_KernelVariant_base(var) != i) continue;
      img = kiln_fb_KernelVariant_image(var);
      entries = kiln_fb_KernelVariant_entry_offsets(var);
    }
    const char* triple = kiln_fb_KernelImage_target_triple(img);
    const char* features = kiln_fb_KernelImage_cpu_features(img);
    const char* name = variant_name(img);
    if ((s = check_text(triple, "kernel image", i, "target_triple")) ||
        (s = check_text(features, "kernel image", i, "cpu_features")) ||
        (s = check_text(name, "kernel image", i, "variant")))
      return s;
    candidates++;
    if (used < sizeof names)
      used += (size_t)snprintf(names + used, sizeof names - used, "%s'%s'", used ? ", " : "", name);
    if (forced && strcmp(forced, name) != 0) continue;
    if (!kiln_host_supports(triple, features, reason, sizeof reason)) {
      if (forced || v == variant_count) {
        if (forced || candidates == 1)
          return kiln_make_status(KILN_UNIMPLEMENTED,
                                  "kernel image %u%s%s%s (target '%s', features '%s') cannot run "
                                  "on this host: %s", (unsigned)i, *name ? " variant '" : "", name,
                                  *name ? "'" : "", triple, features, reason);
        return kiln_make_status(KILN_UNIMPLEMENTED,
                                "kernel image %u: none of its %u variants (%s) can run on this "
                                "host; the baseline '%s' (target '%s', features '%s'): %s",
                                (unsigned)i, (unsigned)candidates, names, name, triple, features,
                                reason);
      }
      continue;
    }
    m->image_tables[i] = img;
    m->image_variants[i] = name;
    m->image_entries[i] = entries;
    return NULL;
  }
  return kiln_make_status(KILN_UNIMPLEMENTED,
                          "KILN_CPU_VARIANT=%s names no variant of kernel image %u (it has %s)",
                          forced, (unsigned)i, names);
}

/* kernel_rank: image_count zeros (counts each image's kernels as they come). */
static kiln_status_t decode_kernels_with(kiln_module_t* m, const uint8_t* root,
                                         uint32_t* kernel_rank) {
  uint32_t i, j;
  kiln_status_t s;
  m->image_count = kiln_fb_Module_kernel_images_len(root);
  ALLOC(m->images, m->image_count, "kernel images");
  ALLOC(m->image_tables, m->image_count, "kernel images");
  ALLOC(m->image_variants, m->image_count, "kernel images");
  ALLOC(m->image_entries, m->image_count, "kernel images");
  m->element_aligned_bindings = kiln_fb_Module_element_aligned_bindings(root) != 0;
  if ((s = check_variants(root))) return s;
  for (i = 0; i < m->image_count; ++i) {
    if ((s = choose_variant(m, root, i))) return s;
    const uint8_t* img = m->image_tables[i];
    uint64_t text_size = kiln_fb_KernelImage_text_size(img);
    uint64_t align = kiln_fb_KernelImage_segment_align(img);
    const uint64_t* entries = kiln_fb_KernelImage_entry_points(img);
    uint32_t e, entry_count = kiln_fb_KernelImage_entry_points_len(img);
    if (text_size > SIZE_MAX || align > SIZE_MAX)
      return CORRUPT("kernel image %u: text_size %llu or segment_align %llu is too large",
                     (unsigned)i, (unsigned long long)text_size,
                     (unsigned long long)align);
    s = kiln_kernel_image_load(kiln_fb_KernelImage_code(img),
                               kiln_fb_KernelImage_code_len(img), (size_t)text_size,
                               (size_t)align, kiln_fb_KernelImage_relocs_bytes(img),
                               kiln_fb_KernelImage_relocs_len(img), &m->images[i]);
    if (s) return kiln_status_annotate(s, "kernel image %u", (unsigned)i);
    for (e = 0; e < entry_count; ++e) {
      if (entries[e] >= text_size)
        return CORRUPT("kernel image %u: entry point %u (0x%llx) is outside its text "
                       "(%llu bytes)", (unsigned)i, (unsigned)e,
                       (unsigned long long)entries[e], (unsigned long long)text_size);
      if (e > 0 && entries[e] <= entries[e - 1])
        return CORRUPT("kernel image %u: entry points are not strictly increasing (entry "
                       "point %u is 0x%llx, the one before it 0x%llx)", (unsigned)i,
                       (unsigned)e, (unsigned long long)entries[e],
                       (unsigned long long)entries[e - 1]);
    }
  }
  m->kernel_count = kiln_fb_Module_kernels_len(root);
  ALLOC(m->kernels, m->kernel_count, "kernels");
  for (i = 0; i < m->kernel_count; ++i) {
    const uint8_t* k = kiln_fb_Module_kernels_at(root, i);
    kiln_kernel_info_t* ki = &m->kernels[i];
    uint32_t image = kiln_fb_Kernel_image(k);
    uint64_t entry = kiln_fb_Kernel_entry_offset(k);
    ki->name = kiln_fb_Kernel_name(k);
    if ((s = check_text(ki->name, "kernel", i, "name"))) return s;
    if (image >= m->image_count)
      return CORRUPT("kernel %u '%s': image index %u out of range (%u images)",
                     (unsigned)i, ki->name, (unsigned)image, (unsigned)m->image_count);
    if (m->image_entries[image]) entry = m->image_entries[image][kernel_rank[image]];
    kernel_rank[image]++;
    const uint8_t* img = m->image_tables[image];
    ki->fn = kiln_kernel_image_entry(m->images[image], entry);
    if (!ki->fn)
      return CORRUPT("kernel %u '%s': entry offset %llu is outside the text of image %u",
                     (unsigned)i, ki->name, (unsigned long long)entry, (unsigned)image);
    if (!is_entry_point(img, entry))
      return CORRUPT("kernel %u '%s': entry offset 0x%llx is not one of the %u entry "
                     "points of image %u", (unsigned)i, ki->name, (unsigned long long)entry,
                     (unsigned)kiln_fb_KernelImage_entry_points_len(img), (unsigned)image);
    {
      const uint64_t* entries = kiln_fb_KernelImage_entry_points(img);
      uint32_t e, n = kiln_fb_KernelImage_entry_points_len(img);
      ki->code_size = kiln_fb_KernelImage_text_size(img) - entry;
      for (e = 0; e < n; ++e)
        if (entries[e] > entry) {
          ki->code_size = entries[e] - entry;
          break;
        }
    }
    ki->max_workgroups = kiln_fb_Kernel_max_workgroups(k);
    ki->flops = kiln_fb_Kernel_flops(k);
    if (ki->max_workgroups < 1 || ki->max_workgroups > KILN_MAX_WORKGROUPS)
      return CORRUPT("kernel %u '%s': max_workgroups %u is outside [1, %u]", (unsigned)i,
                     ki->name, (unsigned)ki->max_workgroups, (unsigned)KILN_MAX_WORKGROUPS);
    ki->binding_count = kiln_fb_Kernel_bindings_len(k);
    ki->push_count = kiln_fb_Kernel_push_constant_count(k);
    ALLOC(ki->binding_sizes, ki->binding_count, "bindings");
    ALLOC(ki->binding_writable, ki->binding_count, "bindings");
    for (j = 0; j < ki->binding_count; ++j) {
      const uint8_t* b = kiln_fb_Kernel_bindings_at(k, j);
      ki->binding_sizes[j] = kiln_fb_Binding_byte_size(b);
      ki->binding_writable[j] = kiln_fb_Binding_writable(b) != 0;
    }
  }
  return NULL;
}

static kiln_status_t decode_kernels(kiln_module_t* m, const uint8_t* root) {
  uint32_t* kernel_rank = NULL;
  uint32_t images = kiln_fb_Module_kernel_images_len(root);
  ALLOC(kernel_rank, images, "kernel images");
  kiln_status_t s = decode_kernels_with(m, root, kernel_rank);
  free(kernel_rank);
  return s;
}

/* Appends the module's kernels to /tmp/perf-<pid>.map ("START SIZE name" in
 * hex), the file perf reads to name JIT-compiled code. */
static kiln_status_t write_perf_map(const kiln_module_t* m) {
  char path[64];
  uint32_t i;
  snprintf(path, sizeof path, "/tmp/perf-%ld.map", (long)getpid());
  FILE* f = fopen(path, "a");
  if (!f) return kiln_make_status(KILN_NOT_FOUND, "perf map: cannot append to %s", path);
  for (i = 0; i < m->kernel_count; ++i)
    fprintf(f, "%llx %llx kiln:%s:%s\n", (unsigned long long)(uintptr_t)m->kernels[i].fn,
            (unsigned long long)m->kernels[i].code_size, m->name, m->kernels[i].name);
  if (fclose(f) != 0)
    return kiln_make_status(KILN_INTERNAL, "perf map: writing %s failed", path);
  return NULL;
}

typedef struct named {
  const char* name;
  uint32_t index;
} named_t;

static int compare_named(const void* a, const void* b) {
  const named_t* x = a;
  const named_t* y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* DATA_LOSS when two of the `count` names (the `const char*` at `offset` in
 * each `stride`-byte record of `records`) are equal: lookups by name
 * (functions, globals) must have one answer. Sorting keeps it O(n log n)
 * whatever the file holds. */
static kiln_status_t check_unique_names(const char* what, const void* records, size_t stride,
                                        size_t offset, uint32_t count) {
  named_t* sorted;
  uint32_t i;
  kiln_status_t s = NULL;
  if (count < 2) return NULL;
  sorted = malloc(sizeof *sorted * count);
  if (!sorted) return kiln_make_status(KILN_OUT_OF_MEMORY, "checking %u %s names", count, what);
  for (i = 0; i < count; ++i) {
    memcpy(&sorted[i].name, (const char*)records + (size_t)i * stride + offset,
           sizeof sorted[i].name);
    sorted[i].index = i;
  }
  qsort(sorted, count, sizeof *sorted, compare_named);
  for (i = 1; i < count && !s; ++i)
    if (strcmp(sorted[i - 1].name, sorted[i].name) == 0)
      s = CORRUPT("%s %u and %s %u are both named '%s' (names must be unique)", what,
                  (unsigned)sorted[i - 1].index, what, (unsigned)sorted[i].index,
                  sorted[i].name);
  free(sorted);
  return s;
}

static kiln_status_t load_verified(kiln_module_t* m) {
  char error[320];
  const uint8_t* root;
  kiln_status_t s;
  uint32_t i;
  if ((s = check_container(m))) return s;
  if (!kiln_fb_verify_Module_buffer(m->data, m->size, error, sizeof error))
    return CORRUPT("corrupt module: %s", error);
  root = kiln_fb_Module_root(m->data);
  m->name = kiln_fb_Module_name(root);
  if ((s = check_text(m->name, "module", 0, "name"))) return s;
  if ((s = decode_types(m, root))) return s;
  if ((s = decode_functions(m, root))) return s;
  if ((s = decode_data(m, root))) return s;
  if ((s = decode_kernels(m, root))) return s;
  m->provenance_count = kiln_fb_Module_provenance_len(root);
  for (i = 0; i < m->provenance_count; ++i) {
    const uint8_t* e = kiln_fb_Module_provenance_at(root, i);
    if ((s = check_text(kiln_fb_Metadata_key(e), "provenance entry", i, "key")) ||
        (s = check_text(kiln_fb_Metadata_value(e), "provenance entry", i, "value")))
      return s;
  }
  if ((s = check_unique_names("function", m->functions, sizeof *m->functions,
                              offsetof(kiln_function_info_t, name), m->function_count)) ||
      (s = check_unique_names("global", m->globals, sizeof *m->globals,
                              offsetof(kiln_global_info_t, info.name), m->global_count)))
    return s;
  for (i = 0; i < m->function_count; ++i)
    if ((s = kiln_verify_function(m, i))) return s;
  if (kiln_instance_perf_map(m->instance) && (s = write_perf_map(m))) return s;
  if (kiln_instance_gdb_jit(m->instance) && (s = kiln_gdb_jit_register_module(m, &m->gdb_jit)))
    return s;
  return NULL;
}

static kiln_status_t module_new(kiln_instance_t* instance, kiln_module_t** out,
                                kiln_module_t** m) {
  if (!out) return kiln_make_status(KILN_INVALID_ARGUMENT, "module load: out is NULL");
  *out = NULL;
  if (!instance)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "module load: instance is NULL");
  *m = calloc(1, sizeof **m);
  if (!*m) return kiln_make_status(KILN_OUT_OF_MEMORY, "allocating a module");
  atomic_init(&(*m)->refs, 1);
  kiln_instance_retain(instance);
  (*m)->instance = instance;
  return NULL;
}

static kiln_status_t module_finish(kiln_module_t* m, kiln_module_t** out) {
  kiln_status_t s = load_verified(m);
  if (s && kiln_status_code(s) == KILN_DATA_LOSS &&
      m->version_major == KILN_MODULE_VERSION_MAJOR &&
      m->version_minor > KILN_MODULE_VERSION_MINOR) {
    /* A newer minor version loads when all it adds is fields this runtime
     * ignores; when its checked parts hold something unknown (an opcode, a
     * template field, an enum value), the version is the reason, not damage:
     * say so (the checksum has already vouched for the bytes). */
    kiln_status_t v = kiln_make_status(
        KILN_UNIMPLEMENTED,
        "module format version %u.%u is newer than this runtime reads (%d.%d), and it uses "
        "what this runtime does not know (%s): load it with a newer kiln runtime",
        (unsigned)m->version_major, (unsigned)m->version_minor, KILN_MODULE_VERSION_MAJOR,
        KILN_MODULE_VERSION_MINOR, kiln_status_message(s));
    kiln_status_free(s);
    s = v;
  }
  if (s) {
    module_destroy(m);
    return s;
  }
  *out = m;
  return NULL;
}

kiln_status_t kiln_module_load_memory(kiln_instance_t* instance, const void* data,
                                      size_t size, kiln_module_t** out) {
  kiln_module_t* m = NULL;
  kiln_status_t s = module_new(instance, out, &m);
  void* copy = NULL;
  if (s) return s;
  if (!data && size) {
    module_destroy(m);
    return kiln_make_status(KILN_INVALID_ARGUMENT, "module load: data is NULL");
  }
  if (posix_memalign(&copy, KILN_FB_MAX_ALIGN, size ? size : 1) != 0) {
    module_destroy(m);
    return kiln_make_status(KILN_OUT_OF_MEMORY, "copying a module of %zu bytes", size);
  }
  if (size) memcpy(copy, data, size);
  m->owned = copy;
  m->data = copy;
  m->size = size;
  return module_finish(m, out);
}

/* Why the bytes of the open file `fd` cannot change while it is mapped, or
 * NULL when they can. Only then is the file used in place (mapped): a file
 * changed after loading would otherwise feed unverified bytes to the VM, and
 * a truncated one would fault (SIGBUS) on access. */
static const char* file_cannot_change(int fd) {
#ifdef F_GET_SEALS
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals >= 0 && (seals & F_SEAL_WRITE) && (seals & F_SEAL_SHRINK))
    return "a memfd sealed against writing and shrinking";
#endif
#if defined(__linux__) && defined(FS_IOC_GETFLAGS) && defined(FS_IMMUTABLE_FL)
  {
    int flags = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_IMMUTABLE_FL))
      return "a file with the immutable attribute";
  }
#endif
#if defined(__linux__)
  {
    struct statfs fs;
    if (fstatfs(fd, &fs) == 0 &&
        ((uint32_t)fs.f_type == KILN_SQUASHFS_MAGIC || (uint32_t)fs.f_type == KILN_EROFS_MAGIC))
      return "a file on a read-only file system image (squashfs or erofs)";
  }
#endif
  return NULL;
}

/* Reads the whole file into a 64-byte aligned buffer that the module owns. A
 * file that shrinks while it is read gives what was there (the checksum then
 * fails); one that grows is read up to the size fstat reported. */
static kiln_status_t read_file(kiln_module_t* m, int fd, size_t size, const char* path) {
  size_t done = 0;
  void* copy = NULL;
  if (posix_memalign(&copy, KILN_FB_MAX_ALIGN, size) != 0)
    return kiln_make_status(KILN_OUT_OF_MEMORY, "reading module '%s' of %zu bytes", path,
                            size);
  m->owned = copy;
  while (done < size) {
    ssize_t n = read(fd, (char*)copy + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return kiln_make_status(KILN_IO, "cannot read module '%s': %s", path, strerror(errno));
    if (n == 0) break;
    done += (size_t)n;
  }
  m->data = copy;
  m->size = done;
  return NULL;
}

kiln_status_t kiln_module_load_file(kiln_instance_t* instance, const char* path,
                                    kiln_module_t** out) {
  kiln_module_t* m = NULL;
  kiln_status_t s = module_new(instance, out, &m);
  struct stat st;
  int fd;
  if (s) return s;
  if (!path) {
    module_destroy(m);
    return kiln_make_status(KILN_INVALID_ARGUMENT, "module load: path is NULL");
  }
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    module_destroy(m);
    return kiln_make_status(e == ENOENT ? KILN_NOT_FOUND : KILN_IO,
                            "cannot open module '%s': %s", path, strerror(e));
  }
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    module_destroy(m);
    return kiln_make_status(KILN_IO, "cannot read module '%s': %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    module_destroy(m);
    return kiln_make_status(KILN_IO, "cannot read module '%s': not a regular file", path);
  }
  if (st.st_size == 0) {
    close(fd);
    module_destroy(m);
    return CORRUPT("module '%s' is an empty file", path);
  }
  if ((uint64_t)st.st_size > SIZE_MAX) {
    close(fd);
    module_destroy(m);
    return kiln_make_status(KILN_OUT_OF_MEMORY, "module '%s' is too large", path);
  }
  if (file_cannot_change(fd)) {
    m->mapping = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->mapping == MAP_FAILED) {
      int e = errno;
      close(fd);
      m->mapping = NULL;
      module_destroy(m);
      return kiln_make_status(KILN_IO, "cannot map module '%s': %s", path, strerror(e));
    }
    m->mapping_size = (size_t)st.st_size;
    m->data = m->mapping;
    m->size = m->mapping_size;
  } else {
    s = read_file(m, fd, (size_t)st.st_size, path);
  }
  close(fd);
  if (s) {
    module_destroy(m);
    return s;
  }
  s = module_finish(m, out);
  return s ? kiln_status_annotate(s, "%s", path) : NULL;
}

void kiln_module_retain(kiln_module_t* module) {
  if (module) atomic_fetch_add_explicit(&module->refs, 1, memory_order_relaxed);
}

void kiln_module_release(kiln_module_t* module) {
  if (module && atomic_fetch_sub_explicit(&module->refs, 1, memory_order_acq_rel) == 1)
    module_destroy(module);
}

const char* kiln_module_name(const kiln_module_t* module) {
  return module ? module->name : "";
}

/* ---- reflection ---------------------------------------------------------- */

static const kiln_function_info_t* function_info(kiln_function_t f) {
  if (!f.module || f.ordinal >= f.module->function_count) return NULL;
  return &f.module->functions[f.ordinal];
}

size_t kiln_module_function_count(const kiln_module_t* module) {
  return module ? module->export_count : 0;
}

kiln_status_t kiln_module_function_at(const kiln_module_t* module, size_t index,
                                      kiln_function_t* out) {
  if (!module || !out)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "function_at: module or out is NULL");
  if (index >= module->export_count)
    return kiln_make_status(KILN_NOT_FOUND,
                            "module '%s' has %u exported functions, asked for index %zu",
                            module->name, (unsigned)module->export_count, index);
  out->module = module;
  out->ordinal = module->exports[index];
  return NULL;
}

kiln_status_t kiln_module_lookup_function(const kiln_module_t* module, const char* name,
                                          kiln_function_t* out) {
  uint32_t i;
  size_t n = 0;
  char known[256];
  if (!module || !name || !out)
    return kiln_make_status(KILN_INVALID_ARGUMENT,
                            "lookup_function: module, name or out is NULL");
  known[0] = 0;
  for (i = 0; i < module->export_count; ++i) {
    const char* fname = module->functions[module->exports[i]].name;
    if (strcmp(fname, name) == 0) {
      out->module = module;
      out->ordinal = module->exports[i];
      return NULL;
    }
    if (n < sizeof known) {
      int k = snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", fname);
      if (k > 0) n += (size_t)k;
    }
  }
  return kiln_make_status(KILN_NOT_FOUND,
                          "module '%s' has no exported function '%s' (it exports: %s)",
                          module->name, name, module->export_count ? known : "nothing");
}

const char* kiln_function_name(kiln_function_t function) {
  const kiln_function_info_t* f = function_info(function);
  return f ? f->name : "";
}

size_t kiln_function_arg_count(kiln_function_t function) {
  const kiln_function_info_t* f = function_info(function);
  return f ? f->arg_count : 0;
}

size_t kiln_function_result_count(kiln_function_t function) {
  const kiln_function_info_t* f = function_info(function);
  return f ? f->result_count : 0;
}

static kiln_status_t value_at(kiln_function_t function, size_t index, int results,
                              kiln_value_info_t* out) {
  const kiln_function_info_t* f = function_info(function);
  uint32_t count;
  if (!f || !out)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "%s_info: bad function or out is NULL",
                            results ? "result" : "arg");
  count = results ? f->result_count : f->arg_count;
  if (index >= count)
    return kiln_make_status(KILN_NOT_FOUND, "function '%s' has %u %s, asked for index %zu",
                            f->name, (unsigned)count, results ? "results" : "arguments",
                            index);
  *out = results ? f->results[index] : f->args[index];
  return NULL;
}

kiln_status_t kiln_function_arg_info(kiln_function_t function, size_t index,
                                     kiln_value_info_t* out) {
  return value_at(function, index, 0, out);
}

kiln_status_t kiln_function_result_info(kiln_function_t function, size_t index,
                                        kiln_value_info_t* out) {
  return value_at(function, index, 1, out);
}

const char* kiln_function_arg_tree(kiln_function_t function) {
  const kiln_function_info_t* f = function_info(function);
  return f ? f->arg_tree : "";
}

const char* kiln_function_result_tree(kiln_function_t function) {
  const kiln_function_info_t* f = function_info(function);
  return f ? f->result_tree : "";
}

uint64_t kiln_function_transient_size(kiln_function_t function) {
  const kiln_function_info_t* f = function_info(function);
  return f ? f->transient_size : 0;
}

size_t kiln_module_kernel_image_count(const kiln_module_t* module) {
  return module ? module->image_count : 0;
}

const char* kiln_module_kernel_variant(const kiln_module_t* module, size_t index) {
  if (!module || index >= module->image_count) return NULL;
  return module->image_variants[index];
}

size_t kiln_module_provenance_count(const kiln_module_t* module) {
  return module ? module->provenance_count : 0;
}

kiln_status_t kiln_module_provenance_at(const kiln_module_t* module, size_t index,
                                        const char** key, const char** value) {
  if (!module || !key || !value)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "provenance_at: module, key or value is NULL");
  if (index >= module->provenance_count)
    return kiln_make_status(KILN_NOT_FOUND, "provenance entry %zu: the module has %u", index,
                            (unsigned)module->provenance_count);
  const uint8_t* e = kiln_fb_Module_provenance_at(kiln_fb_Module_root(module->data),
                                                  (uint32_t)index);
  *key = kiln_fb_Metadata_key(e);
  *value = kiln_fb_Metadata_value(e);
  return NULL;
}

/* The value of provenance entry `key`, or NULL. */
const char* kiln_module_provenance(const kiln_module_t* module, const char* key) {
  const char *k, *v;
  for (size_t i = 0; module && key && i < module->provenance_count; ++i)
    if (!kiln_module_provenance_at(module, i, &k, &v) && strcmp(k, key) == 0) return v;
  return NULL;
}

size_t kiln_module_global_count(const kiln_module_t* module) {
  return module ? module->global_count : 0;
}

kiln_status_t kiln_module_global_info(const kiln_module_t* module, size_t index,
                                      kiln_value_info_t* out) {
  if (!module || !out)
    return kiln_make_status(KILN_INVALID_ARGUMENT, "global_info: module or out is NULL");
  if (index >= module->global_count)
    return kiln_make_status(KILN_NOT_FOUND, "module '%s' has %u globals, asked for index %zu",
                            module->name, (unsigned)module->global_count, index);
  *out = module->globals[index].info;
  return NULL;
}
