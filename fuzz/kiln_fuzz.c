/* The structure-aware mutator and the trusted-kernel fingerprints of the kiln
 * fuzz targets (see kiln_fuzz.h and docs/testing.md, "Fuzzing").
 *
 * The mutator parses the module's flatbuffer with the generated readers and
 * collects "sites": byte offsets of things the loader and the VM interpret
 * (bytecode opcodes, register operands, table indices, branch targets, list
 * counts, immediates; type dtypes and dimensions; register counts; binding
 * sizes; kernel bounds; vector lengths). It rewrites one to four of them in
 * place, so the flatbuffer stays well formed and the mutation reaches the
 * bytecode verifier and the interpreter, and then recomputes the checksum
 * trailer (all but 1 in 32 times, so the checksum's own rejection is still
 * exercised). A part of the time it hands the input to libFuzzer's generic
 * mutator instead. */
#include "kiln_fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "generated/bytecode_ops.h"
#include "generated/module_fb.h"

/* ---- container ---------------------------------------------------------- */

uint8_t* kf_aligned_copy(const uint8_t* data, size_t size) {
  size_t rounded = (size + 63) / 64 * 64;
  uint8_t* out = aligned_alloc(64, rounded ? rounded : 64);
  if (out && size) memcpy(out, data, size);
  return out;
}

int kf_has_trailer(const uint8_t* data, size_t size) {
  return size >= KILN_TRAILER_SIZE &&
         memcmp(data + size - KILN_TRAILER_SIZE, KILN_TRAILER_MAGIC, 8) == 0;
}

void kf_reseal(uint8_t* data, size_t size) {
  uint32_t crc;
  uint8_t le[4];
  if (!kf_has_trailer(data, size)) return;
  crc = kiln_crc32(0, data, size - 4);
  le[0] = (uint8_t)crc;
  le[1] = (uint8_t)(crc >> 8);
  le[2] = (uint8_t)(crc >> 16);
  le[3] = (uint8_t)(crc >> 24);
  memcpy(data + size - 4, le, 4);
}

const uint8_t* kf_verified_root(const uint8_t* aligned, size_t size) {
  char error[64];
  size_t fb = kf_has_trailer(aligned, size) ? size - KILN_TRAILER_SIZE : size;
  if (!kiln_fb_verify_Module_buffer(aligned, fb, error, sizeof error)) return NULL;
  return kiln_fb_Module_root(aligned);
}

static uint32_t rd32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint64_t rd64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static void wr32(uint8_t* p, uint32_t v) { memcpy(p, &v, 4); }
static void wr64(uint8_t* p, uint64_t v) { memcpy(p, &v, 8); }

/* ---- trusted kernels ---------------------------------------------------- */

typedef struct kf_seed {
  uint8_t* data;
  size_t size;
  const uint8_t* root;
} kf_seed_t;

static kf_seed_t* g_seeds;
static size_t g_seed_count;

int kf_seed_add(const uint8_t* data, size_t size) {
  kf_seed_t* grown;
  uint8_t* copy = kf_aligned_copy(data, size);
  const uint8_t* root = copy ? kf_verified_root(copy, size) : NULL;
  if (!root) {
    free(copy);
    return 0;
  }
  grown = realloc(g_seeds, (g_seed_count + 1) * sizeof *g_seeds);
  if (!grown) {
    free(copy);
    return 0;
  }
  g_seeds = grown;
  g_seeds[g_seed_count].data = copy;
  g_seeds[g_seed_count].size = size;
  g_seeds[g_seed_count].root = root;
  g_seed_count++;
  return 1;
}

int kf_seed_add_dir(const char* dir, int (*accept)(const uint8_t* data, size_t size)) {
  DIR* d = opendir(dir);
  struct dirent* e;
  int kept = 0;
  if (!d) return -1;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    char path[4096];
    FILE* f;
    long size;
    uint8_t* buf;
    if (n < 5 || strcmp(e->d_name + n - 5, ".vmfb") != 0) continue;
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
    if (!(f = fopen(path, "rb"))) continue;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)size)) != NULL) {
      if (fread(buf, 1, (size_t)size, f) == (size_t)size && (!accept || accept(buf, (size_t)size)))
        kept += kf_seed_add(buf, (size_t)size);
      free(buf);
    }
    fclose(f);
  }
  closedir(d);
  return kept;
}

size_t kf_seed_count(void) { return g_seed_count; }

static int same_bytes(const void* a, const void* b, size_t n) {
  return n == 0 || (a && b && memcmp(a, b, n) == 0);
}

static int images_equal(const uint8_t* a, const uint8_t* b) {
  uint32_t n = kiln_fb_KernelImage_code_len(a);
  uint32_t r = kiln_fb_KernelImage_relocs_len(a);
  uint32_t e = kiln_fb_KernelImage_entry_points_len(a);
  return n == kiln_fb_KernelImage_code_len(b) &&
         same_bytes(kiln_fb_KernelImage_code(a), kiln_fb_KernelImage_code(b), n) &&
         kiln_fb_KernelImage_text_size(a) == kiln_fb_KernelImage_text_size(b) &&
         kiln_fb_KernelImage_segment_align(a) == kiln_fb_KernelImage_segment_align(b) &&
         r == kiln_fb_KernelImage_relocs_len(b) &&
         same_bytes(kiln_fb_KernelImage_relocs_bytes(a), kiln_fb_KernelImage_relocs_bytes(b),
                    (size_t)r * KILN_FB_RELOC_SIZE) &&
         e == kiln_fb_KernelImage_entry_points_len(b) &&
         same_bytes(kiln_fb_KernelImage_entry_points(a), kiln_fb_KernelImage_entry_points(b),
                    (size_t)e * 8);
}

/* Kernel `k` asks no more of its native code than seed kernel `s` does. */
static int kernel_within(const uint8_t* k, const uint8_t* s) {
  uint32_t i, n = kiln_fb_Kernel_bindings_len(k);
  if (kiln_fb_Kernel_image(k) != kiln_fb_Kernel_image(s) ||
      kiln_fb_Kernel_entry_offset(k) != kiln_fb_Kernel_entry_offset(s) ||
      n != kiln_fb_Kernel_bindings_len(s) ||
      kiln_fb_Kernel_push_constant_count(k) < kiln_fb_Kernel_push_constant_count(s) ||
      kiln_fb_Kernel_max_workgroups(k) > kiln_fb_Kernel_max_workgroups(s))
    return 0;
  /* A kernel reads at most its read-only bindings' sizes and writes every
   * byte of its writable ones (kernel_abi.h), so a read-only binding may
   * grow but a written one must stay exactly as it was. */
  for (i = 0; i < n; ++i) {
    const uint8_t* bk = kiln_fb_Kernel_bindings_at(k, i);
    const uint8_t* bs = kiln_fb_Kernel_bindings_at(s, i);
    int writable = kiln_fb_Binding_writable(bs) != 0;
    if ((kiln_fb_Binding_writable(bk) != 0) != writable) return 0;
    if (writable ? kiln_fb_Binding_byte_size(bk) != kiln_fb_Binding_byte_size(bs)
                 : kiln_fb_Binding_byte_size(bk) < kiln_fb_Binding_byte_size(bs))
      return 0;
  }
  return 1;
}

static int same_string(const char* a, const char* b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* A kernel build (format 2.4) the runtime may load instead of its base image:
 * the same code, entry points and CPU features as the seed's (features decide
 * which build a host runs, so a build claiming fewer features than its code
 * uses would be run where it faults). */
static int variants_equal(const uint8_t* a, const uint8_t* b) {
  const uint8_t* ia = kiln_fb_KernelVariant_image(a);
  const uint8_t* ib = kiln_fb_KernelVariant_image(b);
  uint32_t n = kiln_fb_KernelVariant_entry_offsets_len(a);
  if (kiln_fb_KernelVariant_base(a) != kiln_fb_KernelVariant_base(b) ||
      n != kiln_fb_KernelVariant_entry_offsets_len(b) ||
      !same_bytes(kiln_fb_KernelVariant_entry_offsets(a), kiln_fb_KernelVariant_entry_offsets(b),
                  (size_t)n * 8))
    return 0;
  if (!ia || !ib) return !ia && !ib;
  return images_equal(ia, ib) &&
         same_string(kiln_fb_KernelImage_cpu_features(ia), kiln_fb_KernelImage_cpu_features(ib)) &&
         same_string(kiln_fb_KernelImage_target_triple(ia), kiln_fb_KernelImage_target_triple(ib));
}

static int native_code_within(const uint8_t* root, const uint8_t* seed) {
  uint32_t i, images = kiln_fb_Module_kernel_images_len(root);
  uint32_t kernels = kiln_fb_Module_kernels_len(root);
  uint32_t variants = kiln_fb_Module_kernel_variants_len(root);
  if (images != kiln_fb_Module_kernel_images_len(seed) ||
      kernels != kiln_fb_Module_kernels_len(seed) ||
      variants != kiln_fb_Module_kernel_variants_len(seed))
    return 0;
  for (i = 0; i < images; ++i)
    if (!images_equal(kiln_fb_Module_kernel_images_at(root, i),
                      kiln_fb_Module_kernel_images_at(seed, i)))
      return 0;
  for (i = 0; i < variants; ++i)
    if (!variants_equal(kiln_fb_Module_kernel_variants_at(root, i),
                        kiln_fb_Module_kernel_variants_at(seed, i)))
      return 0;
  for (i = 0; i < kernels; ++i)
    if (!kernel_within(kiln_fb_Module_kernels_at(root, i), kiln_fb_Module_kernels_at(seed, i)))
      return 0;
  return 1;
}

int kf_native_code_is_trusted(const uint8_t* root) {
  size_t i;
  for (i = 0; i < g_seed_count; ++i)
    if (native_code_within(root, g_seeds[i].root)) return 1;
  return 0;
}

uint32_t kf_max_registers(const uint8_t* root) {
  uint32_t i, most = 0, n = kiln_fb_Module_functions_len(root);
  for (i = 0; i < n; ++i) {
    const uint8_t* f = kiln_fb_Module_functions_at(root, i);
    uint32_t r = kiln_fb_Function_ref_register_count(f);
    uint32_t x = kiln_fb_Function_i64_register_count(f);
    if (r > most) most = r;
    if (x > most) most = x;
  }
  return most;
}

/* ---- random numbers ----------------------------------------------------- */

typedef struct kf_rng {
  uint64_t s;
} kf_rng_t;

static uint64_t rnd64(kf_rng_t* r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* Uniform in [0, n); 0 when n == 0. */
static uint32_t rnd(kf_rng_t* r, uint32_t n) { return n ? (uint32_t)(rnd64(r) % n) : 0; }
static int chance(kf_rng_t* r, uint32_t one_in) { return rnd(r, one_in) == 0; }

/* ---- the module model: sites the mutator may rewrite -------------------- */

typedef enum kf_kind {
  K_OPCODE,   /* u32 opcode word */
  K_INSTR,    /* a whole instruction (words): rewritten or swapped */
  K_REG_R,    /* u32 ref register, limit = ref registers */
  K_REG_I,    /* u32 int register, limit = int registers */
  K_INDEX,    /* u32 table index, limit = table size */
  K_TARGET,   /* u32 branch target, func = the function */
  K_WORKGROUPS, /* u32 dispatch workgroups */
  K_IMM64,    /* i64 immediate */
  K_COUNT,    /* u32 list count of an instruction */
  K_U32,      /* a u32 field (register counts, bounds), limit = a hint */
  K_U64,      /* a u64 field (sizes, offsets) */
  K_U16,      /* version numbers */
  K_DTYPE,    /* i8 dtype */
  K_DIM,      /* i64 dimension */
  K_BOOL,     /* u8 flag */
  K_BYTE,     /* any byte of data */
  K_TEXT,     /* a byte of a possible debug.print template: mostly template syntax */
  K_VECLEN,   /* u32 length prefix of a vector */
} kf_kind_t;

/* Categories are picked first (by weight), then a site within one, so that
 * large code or data does not crowd out small tables. */
typedef enum kf_cat {
  C_CODE,
  C_INSTR,
  C_TYPES,
  C_FUNCS,
  C_DATA,
  C_KERNELS,
  C_IMAGES,
  C_HEADER,
  C_COUNT_
} kf_cat_t;
/* Per profile: the load target spreads its mutations over every table and
 * the container; the invoke target wants modules that still load, so it
 * mostly rewrites code and types and rarely calls the generic mutator. */
static const uint32_t k_cat_weight[2][C_COUNT_] = {
    {36, 16, 16, 8, 6, 10, 4, 4},
    {40, 26, 12, 6, 6, 8, 1, 1},
};
static const uint32_t k_generic_percent[2] = {20, 4};
static int g_profile;

void kf_set_profile(kf_profile_t profile) { g_profile = profile == KF_PROFILE_INVOKE; }

typedef struct kf_site {
  uint32_t off;   /* byte offset in the module file */
  uint32_t limit; /* a bound the value is drawn around (table size, ...) */
  uint32_t func;  /* the function, for code sites */
  uint16_t words; /* K_INSTR: the instruction's length in words */
  uint8_t kind;
} kf_site_t;

typedef struct kf_func {
  uint32_t code_off, code_len; /* byte offset of word 0; words */
  uint32_t ref_count, i64_count, arg_count, result_count;
  uint32_t first_start, start_count; /* instruction starts in model.starts */
} kf_func_t;

typedef struct kf_kernel {
  uint32_t bindings, push, max_workgroups;
} kf_kernel_t;

typedef struct kf_vec {
  void* items;
  size_t len, cap;
} kf_vec_t;

typedef struct kf_model {
  uint32_t types, globals, constants, images;
  uint32_t func_count, kernel_count;
  kf_func_t* funcs;
  kf_kernel_t* kernels;
  kf_vec_t starts;           /* uint32_t word offsets of instructions */
  kf_vec_t instrs;           /* kf_site_t of every decoded instruction */
  kf_vec_t sites[C_COUNT_];  /* kf_site_t */
  int oom;
} kf_model_t;

static void* vec_push(kf_model_t* m, kf_vec_t* v, size_t item) {
  if (v->len == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 64;
    void* grown = realloc(v->items, cap * item);
    if (!grown) {
      m->oom = 1;
      return NULL;
    }
    v->items = grown;
    v->cap = cap;
  }
  return (uint8_t*)v->items + item * v->len++;
}

static void add_site(kf_model_t* m, kf_cat_t cat, kf_kind_t kind, uint32_t off, uint32_t limit,
                     uint32_t func, uint16_t words) {
  kf_site_t* s = vec_push(m, &m->sites[cat], sizeof *s);
  if (!s) return;
  s->off = off;
  s->limit = limit;
  s->func = func;
  s->words = words;
  s->kind = (uint8_t)kind;
}

/* A scalar field of `table`, when it is present in the buffer. */
static void add_field(kf_model_t* m, const uint8_t* buf, const uint8_t* table, unsigned id,
                      kf_cat_t cat, kf_kind_t kind, uint32_t limit) {
  const uint8_t* p = kiln_fb__field_ptr(table, id);
  if (p) add_site(m, cat, kind, (uint32_t)(p - buf), limit, 0, 0);
}

/* The length prefix of a vector field, when present. */
static void add_veclen(kf_model_t* m, const uint8_t* buf, const uint8_t* table, unsigned id,
                       kf_cat_t cat) {
  const uint8_t* vec = kiln_fb__deref(kiln_fb__field_ptr(table, id));
  if (g_profile) return; /* the invoke profile keeps the flatbuffer well formed */
  if (vec) add_site(m, cat, K_VECLEN, (uint32_t)(vec - buf), 0, 0, 0);
}

/* Decodes function `fi`'s code as far as it is well formed, adding a site per
 * opcode, operand and instruction. */
static void decode_code(kf_model_t* m, const uint8_t* buf, uint32_t fi) {
  kf_func_t* f = &m->funcs[fi];
  const uint8_t* code = buf + f->code_off;
  uint32_t pc = 0, len = f->code_len;
  f->first_start = (uint32_t)m->starts.len;
  while (pc < len && !m->oom) {
    uint32_t op = rd32(code + 4u * pc), w = pc + 1, k;
    const kiln_op_info_t* info = kiln_op_info(op);
    uint32_t* start = vec_push(m, &m->starts, sizeof *start);
    int ok = 1;
    if (!start) return;
    *start = pc;
    add_site(m, C_CODE, K_OPCODE, f->code_off + 4u * pc, 0, fi, 0);
    if (!info) break;
    for (k = 0; k < info->operand_count && ok; ++k) {
      uint32_t at = f->code_off + 4u * w, count, j;
      uint8_t kind = info->kinds[k];
      if (kind == KILN_OPERAND_IMM64) {
        if (w + 2 > len) ok = 0;
        else add_site(m, C_CODE, K_IMM64, at, 0, fi, 0);
        w += 2;
        continue;
      }
      if (w >= len) {
        ok = 0;
        break;
      }
      if (kind == KILN_OPERAND_LIST_R || kind == KILN_OPERAND_LIST_I) {
        count = rd32(code + 4u * w);
        add_site(m, C_CODE, K_COUNT, at, 0, fi, 0);
        w++;
        if (count > len - w) {
          ok = 0;
          break;
        }
        for (j = 0; j < count; ++j)
          add_site(m, C_CODE, kind == KILN_OPERAND_LIST_R ? K_REG_R : K_REG_I,
                   f->code_off + 4u * (w + j),
                   kind == KILN_OPERAND_LIST_R ? f->ref_count : f->i64_count, fi, 0);
        w += count;
        continue;
      }
      switch (kind) {
        case KILN_OPERAND_R: add_site(m, C_CODE, K_REG_R, at, f->ref_count, fi, 0); break;
        case KILN_OPERAND_I: add_site(m, C_CODE, K_REG_I, at, f->i64_count, fi, 0); break;
        case KILN_OPERAND_TYPE: add_site(m, C_CODE, K_INDEX, at, m->types, fi, 0); break;
        case KILN_OPERAND_CONST: add_site(m, C_CODE, K_INDEX, at, m->constants, fi, 0); break;
        case KILN_OPERAND_GLOBAL: add_site(m, C_CODE, K_INDEX, at, m->globals, fi, 0); break;
        case KILN_OPERAND_KERNEL: add_site(m, C_CODE, K_INDEX, at, m->kernel_count, fi, 0); break;
        case KILN_OPERAND_FUNC: add_site(m, C_CODE, K_INDEX, at, m->func_count, fi, 0); break;
        case KILN_OPERAND_TARGET: add_site(m, C_CODE, K_TARGET, at, len, fi, 0); break;
        case KILN_OPERAND_IMM: add_site(m, C_CODE, K_WORKGROUPS, at, 0, fi, 0); break;
        default: break;
      }
      w++;
    }
    if (!ok) break;
    {
      kf_site_t* s = vec_push(m, &m->instrs, sizeof *s);
      if (!s) return;
      s->off = f->code_off + 4u * pc;
      s->limit = 0;
      s->func = fi;
      s->words = (uint16_t)(w - pc < 0xffff ? w - pc : 0xffff);
      s->kind = K_INSTR;
      if (w - pc < 0xffff) add_site(m, C_INSTR, K_INSTR, s->off, 0, fi, s->words);
    }
    pc = w;
  }
  f->start_count = (uint32_t)m->starts.len - f->first_start;
}

static void model_free(kf_model_t* m) {
  int c;
  free(m->funcs);
  free(m->kernels);
  free(m->starts.items);
  free(m->instrs.items);
  for (c = 0; c < C_COUNT_; ++c) free(m->sites[c].items);
  memset(m, 0, sizeof *m);
}

/* Builds the model of a 64-byte aligned module file; 0 when its flatbuffer
 * does not verify (or memory runs out). */
static int model_build(kf_model_t* m, const uint8_t* buf, size_t size) {
  const uint8_t* root = kf_verified_root(buf, size);
  uint32_t i, j;
  memset(m, 0, sizeof *m);
  if (!root) return 0;
  m->types = kiln_fb_Module_types_len(root);
  m->globals = kiln_fb_Module_globals_len(root);
  m->constants = kiln_fb_Module_constants_len(root);
  m->images = kiln_fb_Module_kernel_images_len(root);
  m->func_count = kiln_fb_Module_functions_len(root);
  m->kernel_count = kiln_fb_Module_kernels_len(root);
  m->funcs = calloc(m->func_count + 1, sizeof *m->funcs);
  m->kernels = calloc(m->kernel_count + 1, sizeof *m->kernels);
  if (!m->funcs || !m->kernels) {
    model_free(m);
    return 0;
  }
  if (!g_profile) {
    add_field(m, buf, root, 0, C_HEADER, K_U16, 0);
    add_field(m, buf, root, 1, C_HEADER, K_U16, 0);
  }
  for (i = 3; i <= 8; ++i) add_veclen(m, buf, root, i, C_HEADER);

  for (i = 0; i < m->types; ++i) {
    const uint8_t* t = kiln_fb_Module_types_at(root, i);
    const int64_t* shape = kiln_fb_TensorType_shape(t);
    uint32_t rank = kiln_fb_TensorType_shape_len(t);
    add_field(m, buf, t, 0, C_TYPES, K_DTYPE, 0);
    add_veclen(m, buf, t, 1, C_TYPES);
    for (j = 0; j < rank; ++j)
      add_site(m, C_TYPES, K_DIM, (uint32_t)((const uint8_t*)(shape + j) - buf), 0, 0, 0);
  }
  for (i = 0; i < m->kernel_count; ++i) {
    const uint8_t* k = kiln_fb_Module_kernels_at(root, i);
    m->kernels[i].bindings = kiln_fb_Kernel_bindings_len(k);
    m->kernels[i].push = kiln_fb_Kernel_push_constant_count(k);
    m->kernels[i].max_workgroups = kiln_fb_Kernel_max_workgroups(k);
    add_field(m, buf, k, 1, C_KERNELS, K_INDEX, m->images);
    add_field(m, buf, k, 2, C_KERNELS, K_U64, 0);
    add_field(m, buf, k, 4, C_KERNELS, K_U32, 4);
    add_field(m, buf, k, 5, C_KERNELS, K_U32, KILN_MAX_WORKGROUPS);
    add_veclen(m, buf, k, 3, C_KERNELS);
    for (j = 0; j < m->kernels[i].bindings; ++j) {
      const uint8_t* b = kiln_fb_Kernel_bindings_at(k, j);
      add_field(m, buf, b, 0, C_KERNELS, K_U64, 0);
      add_field(m, buf, b, 1, C_KERNELS, K_BOOL, 0);
    }
  }
  for (i = 0; i < m->images; ++i) {
    const uint8_t* img = kiln_fb_Module_kernel_images_at(root, i);
    const uint64_t* points = kiln_fb_KernelImage_entry_points(img);
    const uint8_t* relocs = kiln_fb_KernelImage_relocs_bytes(img);
    add_field(m, buf, img, 3, C_IMAGES, K_U64, 0);
    add_field(m, buf, img, 4, C_IMAGES, K_U64, 0);
    add_veclen(m, buf, img, 2, C_IMAGES);
    add_veclen(m, buf, img, 5, C_IMAGES);
    add_veclen(m, buf, img, 6, C_IMAGES);
    for (j = 0; j < kiln_fb_KernelImage_entry_points_len(img); ++j)
      add_site(m, C_IMAGES, K_U64, (uint32_t)((const uint8_t*)(points + j) - buf), 0, 0, 0);
    for (j = 0; j < kiln_fb_KernelImage_relocs_len(img) && j < 64; ++j) {
      add_site(m, C_IMAGES, K_U64, (uint32_t)(relocs + 16u * j - buf), 0, 0, 0);
      add_site(m, C_IMAGES, K_U64, (uint32_t)(relocs + 16u * j + 8 - buf), 0, 0, 0);
    }
  }
  for (i = 0; i < m->globals; ++i) {
    const uint8_t* g = kiln_fb_Module_globals_at(root, i);
    const uint8_t* data = kiln_fb_Global_data(g);
    uint32_t n = kiln_fb_Global_data_len(g);
    add_field(m, buf, g, 1, C_DATA, K_INDEX, m->types);
    add_field(m, buf, g, 2, C_DATA, K_BOOL, 0);
    add_field(m, buf, g, 4, C_DATA, K_BOOL, 0);
    add_veclen(m, buf, g, 3, C_DATA);
    for (j = 0; j < n && j < 16; ++j)
      add_site(m, C_DATA, K_BYTE, (uint32_t)(data + j - buf), 0, 0, 0);
  }
  for (i = 0; i < m->constants; ++i) {
    const uint8_t* c = kiln_fb_Module_constants_at(root, i);
    const uint8_t* data = kiln_fb_Constant_data(c);
    uint32_t n = kiln_fb_Constant_data_len(c), type = kiln_fb_Constant_type(c), bytes = 16;
    /* A 1-d u8 constant may be a debug.print template (format 2.8): all of
     * its bytes (up to 128) are sites, so specs at its end get rewritten. */
    if (type < m->types) {
      const uint8_t* t = kiln_fb_Module_types_at(root, type);
      if (kiln_fb_TensorType_dtype(t) == KILN_DTYPE_U8 && kiln_fb_TensorType_shape_len(t) == 1)
        bytes = 128;
    }
    add_field(m, buf, c, 0, C_DATA, K_INDEX, m->types);
    add_veclen(m, buf, c, 1, C_DATA);
    for (j = 0; j < n && j < bytes; ++j)
      add_site(m, C_DATA, bytes > 16 ? K_TEXT : K_BYTE, (uint32_t)(data + j - buf), 0, 0, 0);
  }
  for (i = 0; i < m->func_count; ++i) {
    const uint8_t* f = kiln_fb_Module_functions_at(root, i);
    const uint32_t* code = kiln_fb_Function_code(f);
    kf_func_t* info = &m->funcs[i];
    info->ref_count = kiln_fb_Function_ref_register_count(f);
    info->i64_count = kiln_fb_Function_i64_register_count(f);
    info->arg_count = kiln_fb_Function_args_len(f);
    info->result_count = kiln_fb_Function_results_len(f);
    info->code_len = code ? kiln_fb_Function_code_len(f) : 0;
    info->code_off = code ? (uint32_t)((const uint8_t*)code - buf) : 0;
    add_field(m, buf, f, 1, C_FUNCS, K_BOOL, 0);
    add_field(m, buf, f, 6, C_FUNCS, K_U32, KILN_MAX_REGISTERS);
    add_field(m, buf, f, 7, C_FUNCS, K_U32, KILN_MAX_REGISTERS);
    add_veclen(m, buf, f, 2, C_FUNCS);
    add_veclen(m, buf, f, 3, C_FUNCS);
    add_veclen(m, buf, f, 8, C_FUNCS);
    for (j = 0; j < info->arg_count; ++j)
      add_field(m, buf, kiln_fb_Function_args_at(f, j), 1, C_FUNCS, K_INDEX, m->types);
    for (j = 0; j < info->result_count; ++j)
      add_field(m, buf, kiln_fb_Function_results_at(f, j), 1, C_FUNCS, K_INDEX, m->types);
  }
  for (i = 0; i < m->func_count && !m->oom; ++i) decode_code(m, buf, i);
  if (m->oom) {
    model_free(m);
    return 0;
  }
  return 1;
}

/* ---- new values --------------------------------------------------------- */

static uint32_t new_u32(kf_rng_t* r, uint32_t cur, uint32_t limit) {
  switch (rnd(r, 12)) {
    case 0: return cur + 1;
    case 1: return cur - 1;
    case 2: return 0;
    case 3: return limit ? limit - 1 : 1;
    case 4: return limit;
    case 5: return limit + 1;
    case 6: return rnd(r, limit + 2);
    case 7: return 0xffffffffu;
    case 8: return 0x80000000u;
    case 9: return KILN_MAX_REGISTERS + rnd(r, 2);
    case 10: return KILN_MAX_WORKGROUPS + rnd(r, 2);
    default: return cur ^ (1u << rnd(r, 32));
  }
}

/* A register or table index: mostly valid, sometimes just out of range. */
static uint32_t new_index(kf_rng_t* r, uint32_t cur, uint32_t limit) {
  if (chance(r, 8)) return new_u32(r, cur, limit);
  if (chance(r, 6)) return limit;
  return rnd(r, limit ? limit : 1);
}

static uint64_t new_u64(kf_rng_t* r, uint64_t cur) {
  switch (rnd(r, 13)) {
    case 0: return cur + 1;
    case 1: return cur - 1;
    case 2: return 0;
    case 3: return cur + 64;
    case 4: return cur - 64;
    case 5: return cur * 2;
    case 6: return cur / 2;
    case 7: return (uint64_t)1 << 32;
    case 8: return UINT64_MAX;
    case 9: return (uint64_t)1 << 63;
    case 10: return cur + 1 + rnd(r, 16);
    case 11: return rnd(r, (uint32_t)(cur < 0x7fffffff ? cur * 2 + 64 : 0x7fffffff));
    default: return cur ^ ((uint64_t)1 << rnd(r, 64));
  }
}

static int64_t new_i64(kf_rng_t* r, int64_t cur) {
  switch (rnd(r, 12)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return -1;
    case 3: return INT64_MIN;
    case 4: return INT64_MAX;
    case 5: return (int64_t)rnd(r, 16);
    case 6: return (int64_t)(((uint64_t)cur) + 1);
    case 7: return (int64_t)(((uint64_t)cur) - 1);
    case 8: return (int64_t)1 << 31;
    case 9: return (int64_t)1 << 32;
    case 10: return -(int64_t)rnd(r, 16);
    default: return (int64_t)((uint64_t)cur ^ ((uint64_t)1 << rnd(r, 64)));
  }
}

static int64_t new_dim(kf_rng_t* r, int64_t cur) {
  switch (rnd(r, 10)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return -1;
    case 3: return (int64_t)((uint64_t)cur + 1);
    case 4: return cur > 0 ? cur - 1 : 2;
    case 5: return (int64_t)((uint64_t)cur * 2);
    case 6: return (int64_t)rnd(r, 17);
    case 7: return (int64_t)1 << (16 + rnd(r, 47));
    case 8: return INT64_MAX;
    default: return INT64_MIN + (int64_t)rnd(r, 2);
  }
}

/* A random branch target of function `f`: mostly an instruction start. */
static uint32_t new_target(kf_rng_t* r, const kf_model_t* m, const kf_func_t* f, uint32_t cur) {
  const uint32_t* starts = (const uint32_t*)m->starts.items;
  if (f->start_count && !chance(r, 4)) return starts[f->first_start + rnd(r, f->start_count)];
  switch (rnd(r, 5)) {
    case 0: return cur + 1;
    case 1: return cur - 1;
    case 2: return f->code_len;
    case 3: return 0xffffffffu;
    default: return rnd(r, f->code_len + 2);
  }
}

/* ---- rewriting instructions --------------------------------------------- */

/* Writes one random instruction into words[0..*len) with at most `room`
 * words, never leaving exactly one word over (no instruction is that short).
 * Operands are mostly valid for function `f`, so the result often verifies
 * and runs. Returns 0 when the drawn op does not fit. */
static int gen_instr(kf_rng_t* r, const kf_model_t* m, const kf_func_t* f, uint32_t* words,
                     uint32_t room, uint32_t* len) {
  uint32_t op = 1 + rnd(r, KILN_OP_COUNT - 1), w = 1, k, counts[2] = {0, 0}, lists = 0;
  uint32_t callee_or_kernel = 0; /* whose list counts were drawn */
  const kiln_op_info_t* info = kiln_op_info(op);
  uint64_t fixed = 1; /* (64-bit: a mutated push-constant count can be 2^32 - 1) */
  if (!info) return 0;
  for (k = 0; k < info->operand_count; ++k)
    fixed += info->kinds[k] == KILN_OPERAND_IMM64 ? 2 : 1;
  /* Lists: the counts the callee, kernel or function signature wants. */
  if (op == KILN_OP_DISPATCH && m->kernel_count) {
    const kf_kernel_t* kk = &m->kernels[callee_or_kernel = rnd(r, m->kernel_count)];
    counts[0] = kk->bindings;
    counts[1] = kk->push;
  } else if (op == KILN_OP_CALL && m->func_count) {
    const kf_func_t* callee = &m->funcs[callee_or_kernel = rnd(r, m->func_count)];
    counts[0] = callee->arg_count;
    counts[1] = callee->result_count;
  } else if (op == KILN_OP_RET) {
    counts[0] = f->result_count;
  }
  if (chance(r, 4)) {
    counts[0] = rnd(r, 4);
    counts[1] = rnd(r, 3);
  }
  for (k = 0; k < info->operand_count; ++k)
    if (info->kinds[k] == KILN_OPERAND_LIST_R || info->kinds[k] == KILN_OPERAND_LIST_I)
      fixed += counts[lists++ & 1];
  if (fixed > room || room - fixed == 1) return 0;
  words[0] = op;
  lists = 0;
  for (k = 0; k < info->operand_count; ++k) {
    uint32_t kind = info->kinds[k], j, n;
    switch (kind) {
      case KILN_OPERAND_R: words[w++] = new_index(r, 0, f->ref_count); break;
      case KILN_OPERAND_I: words[w++] = new_index(r, 0, f->i64_count); break;
      case KILN_OPERAND_TYPE: words[w++] = new_index(r, 0, m->types); break;
      case KILN_OPERAND_CONST: words[w++] = new_index(r, 0, m->constants); break;
      case KILN_OPERAND_GLOBAL: words[w++] = new_index(r, 0, m->globals); break;
      case KILN_OPERAND_KERNEL:
        words[w++] = chance(r, 4) ? new_index(r, 0, m->kernel_count) : callee_or_kernel;
        break;
      case KILN_OPERAND_FUNC:
        words[w++] = chance(r, 4) ? new_index(r, 0, m->func_count) : callee_or_kernel;
        break;
      case KILN_OPERAND_TARGET: words[w++] = new_target(r, m, f, 0); break;
      case KILN_OPERAND_IMM: words[w++] = chance(r, 4) ? new_u32(r, 1, 64) : 1u + rnd(r, 4); break;
      case KILN_OPERAND_IMM64: {
        uint64_t v = (uint64_t)new_i64(r, 0);
        words[w++] = (uint32_t)v;
        words[w++] = (uint32_t)(v >> 32);
        break;
      }
      case KILN_OPERAND_LIST_R:
      case KILN_OPERAND_LIST_I:
        n = counts[lists++ & 1];
        words[w++] = n;
        for (j = 0; j < n; ++j)
          words[w++] = new_index(r, 0, kind == KILN_OPERAND_LIST_R ? f->ref_count : f->i64_count);
        break;
      default: words[w++] = 0; break;
    }
  }
  *len = w;
  return 1;
}

/* Fills exactly `n` >= 2 words with random instructions; when the span ends
 * the function (`last`), it ends in a terminator, as the verifier requires. */
static void gen_span(kf_rng_t* r, const kf_model_t* m, const kf_func_t* f, uint32_t* words,
                     uint32_t n, int last) {
  uint32_t at = 0, len, tries = 0, end = n;
  if (last) {
    end = n == 3 ? 0 : n - 2;
    if (n == 3) { /* ret of one value */
      words[0] = KILN_OP_RET;
      words[1] = 1;
      words[2] = new_index(r, 0, f->ref_count);
    } else if (chance(r, 2) && f->result_count == 0) {
      words[n - 2] = KILN_OP_RET;
      words[n - 1] = 0;
    } else {
      words[n - 2] = KILN_OP_BR;
      words[n - 1] = new_target(r, m, f, 0);
    }
  }
  n = end;
  while (n - at >= 2) {
    if (tries++ < 64 && gen_instr(r, m, f, words + at, n - at, &len)) {
      at += len;
      continue;
    }
    /* Filler: `mov r, r` (3 words) when an odd count is left, else `br`. */
    if ((n - at) % 2 == 1) {
      words[at++] = KILN_OP_MOV;
      words[at++] = 0;
      words[at++] = 0;
    } else {
      words[at++] = KILN_OP_BR;
      words[at++] = new_target(r, m, f, 0);
    }
  }
}

/* Instructions [first, first + count) of the decoded list, all in one
 * function; returns their total length in words (0 if they are not). */
static uint32_t span_words(const kf_model_t* m, size_t first, size_t count) {
  const kf_site_t* in = (const kf_site_t*)m->instrs.items;
  uint32_t words = 0;
  size_t i;
  if (first + count > m->instrs.len) return 0;
  for (i = first; i < first + count; ++i) {
    if (in[i].func != in[first].func) return 0;
    if (i > first && in[i].off != in[i - 1].off + 4u * in[i - 1].words) return 0;
    words += in[i].words;
  }
  return words;
}

static void mutate_instr(kf_rng_t* r, const kf_model_t* m, const kf_site_t* s, uint8_t* data) {
  const kf_site_t* in = (const kf_site_t*)m->instrs.items;
  const kf_func_t* f = &m->funcs[s->func];
  uint32_t n = s->words, buf[256];
  size_t i;
  switch (rnd(r, 4)) {
    case 0: { /* copy another instruction of the same length over it */
      for (i = 0; i < 8; ++i) {
        const kf_site_t* o = &in[rnd(r, (uint32_t)m->instrs.len)];
        if (o->words == n && o->off != s->off) {
          memmove(data + s->off, data + o->off, 4u * n);
          return;
        }
      }
      break;
    }
    case 1: { /* swap with an instruction of the same length in the function */
      for (i = 0; i < 8; ++i) {
        const kf_site_t* o = &in[rnd(r, (uint32_t)m->instrs.len)];
        if (o->words == n && o->func == s->func && o->off != s->off && n <= 256) {
          memcpy(buf, data + o->off, 4u * n);
          memmove(data + o->off, data + s->off, 4u * n);
          memcpy(data + s->off, buf, 4u * n);
          return;
        }
      }
      break;
    }
    case 2: { /* rewrite a span of up to four instructions from here */
      size_t first = (size_t)-1;
      uint32_t count = 1 + rnd(r, 4), words;
      for (i = 0; i < m->instrs.len; ++i)
        if (in[i].off == s->off) {
          first = i;
          break;
        }
      while (first != (size_t)-1 && count > 1 && !span_words(m, first, count)) count--;
      words = first == (size_t)-1 ? n : span_words(m, first, count);
      if (words >= 2 && words <= 256) {
        gen_span(r, m, f, buf, words, s->off + 4u * words == f->code_off + 4u * f->code_len);
        memcpy(data + s->off, buf, 4u * words);
        return;
      }
      break;
    }
    default: break;
  }
  if (n >= 2 && n <= 256) {
    gen_span(r, m, f, buf, n, s->off + 4u * n == f->code_off + 4u * f->code_len);
    memcpy(data + s->off, buf, 4u * n);
  }
}

/* An opcode with the same operand kinds as `op` (so the instruction keeps
 * its length and its operands their meaning), or `op` when there is none. */
static uint32_t same_shape_opcode(kf_rng_t* r, uint32_t op) {
  const kiln_op_info_t* a = kiln_op_info(op);
  uint32_t candidates[KILN_OP_COUNT], n = 0, c;
  if (!a) return op;
  for (c = 1; c < KILN_OP_COUNT; ++c) {
    const kiln_op_info_t* b = kiln_op_info(c);
    if (b && c != op && b->operand_count == a->operand_count &&
        memcmp(b->kinds, a->kinds, a->operand_count) == 0)
      candidates[n++] = c;
  }
  return n ? candidates[rnd(r, n)] : op;
}

static void mutate_site(kf_rng_t* r, const kf_model_t* m, const kf_site_t* s, uint8_t* data) {
  uint8_t* p = data + s->off;
  const kf_func_t* f = &m->funcs[s->func < m->func_count ? s->func : 0];
  switch ((kf_kind_t)s->kind) {
    case K_OPCODE:
      if (g_profile && !chance(r, 4)) wr32(p, same_shape_opcode(r, rd32(p)));
      else wr32(p, chance(r, 8) ? new_u32(r, rd32(p), KILN_OP_COUNT) : rnd(r, KILN_OP_COUNT + 1));
      break;
    case K_INSTR: mutate_instr(r, m, s, data); break;
    case K_REG_R:
    case K_REG_I:
    case K_INDEX: wr32(p, new_index(r, rd32(p), s->limit)); break;
    case K_TARGET: wr32(p, new_target(r, m, f, rd32(p))); break;
    case K_WORKGROUPS: {
      static const uint32_t v[] = {0, 1, 2, 3, 63, 64, 65, KILN_MAX_WORKGROUPS,
                                   KILN_MAX_WORKGROUPS + 1, 0xffffffffu};
      wr32(p, chance(r, 3) ? new_u32(r, rd32(p), 64) : v[rnd(r, sizeof v / sizeof v[0])]);
      break;
    }
    case K_IMM64: wr64(p, (uint64_t)new_i64(r, (int64_t)rd64(p))); break;
    case K_COUNT: {
      uint32_t cur = rd32(p);
      wr32(p, chance(r, 2) ? cur + 1 - 2 * rnd(r, 2) : new_u32(r, cur, 8));
      break;
    }
    case K_U32:
      /* invoke: register counts mostly move a little; a function with 2^20
       * registers is valid but makes every call of it cost milliseconds */
      if (g_profile && s->limit == KILN_MAX_REGISTERS && !chance(r, 16)) {
        uint32_t cur = rd32(p), d = rnd(r, 4);
        wr32(p, chance(r, 2) || cur < d ? cur + d : cur - d);
      } else {
        wr32(p, new_u32(r, rd32(p), s->limit));
      }
      break;
    case K_U64: wr64(p, new_u64(r, rd64(p))); break;
    case K_U16: {
      static const uint16_t v[] = {0, 1, 2, 3, 0xffff};
      uint16_t cur, nv;
      memcpy(&cur, p, 2);
      nv = chance(r, 2) ? (uint16_t)(cur + 1 - 2 * rnd(r, 2)) : v[rnd(r, 5)];
      memcpy(p, &nv, 2);
      break;
    }
    case K_DTYPE: {
      static const int8_t odd[] = {KILN_DTYPE_COUNT, 127, -1, -128};
      *p = (uint8_t)(chance(r, 8) && !g_profile ? odd[rnd(r, 4)] : (int8_t)rnd(r, KILN_DTYPE_COUNT));
      break;
    }
    case K_DIM: {
      int64_t cur = (int64_t)rd64(p);
      /* invoke: mostly a small size that still makes a buffer */
      if (g_profile && !chance(r, 4) && cur >= 0 && cur < 4096)
        wr64(p, (uint64_t)rnd(r, (uint32_t)(2 * cur + 3)));
      else
        wr64(p, (uint64_t)new_dim(r, cur));
      break;
    }
    case K_BOOL: {
      static const uint8_t v[] = {0, 1, 1, 0, 2, 255};
      *p = v[rnd(r, 6)];
      break;
    }
    case K_BYTE: *p = (uint8_t)rnd64(r); break;
    case K_TEXT: {
      static const char syntax[] = "{}{}:0123456789.<>^=+- _*xfFeEgGd%,!";
      *p = chance(r, 4) ? (uint8_t)rnd64(r) : (uint8_t)syntax[rnd(r, sizeof syntax - 1)];
      break;
    }
    case K_VECLEN: wr32(p, new_u32(r, rd32(p), rd32(p) + 16)); break;
  }
}

/* Picks a category by weight among the non-empty ones, then a site in it. */
static const kf_site_t* pick_site(kf_rng_t* r, const kf_model_t* m) {
  uint32_t total = 0, c, x;
  for (c = 0; c < C_COUNT_; ++c)
    if (m->sites[c].len) total += k_cat_weight[g_profile][c];
  if (!total) return NULL;
  x = rnd(r, total);
  for (c = 0; c < C_COUNT_; ++c) {
    if (!m->sites[c].len) continue;
    if (x < k_cat_weight[g_profile][c])
      return (const kf_site_t*)m->sites[c].items + rnd(r, (uint32_t)m->sites[c].len);
    x -= k_cat_weight[g_profile][c];
  }
  return NULL;
}

/* Structure-aware mutation of a module file in place; 0 when it does not
 * parse (the caller falls back to the generic mutator). */
static int mutate_structured(kf_rng_t* r, uint8_t* data, size_t size) {
  kf_model_t m;
  uint8_t* copy = kf_aligned_copy(data, size);
  uint32_t n, i;
  int done = 0;
  if (!copy) return 0;
  if (!model_build(&m, copy, size)) {
    free(copy);
    return 0;
  }
  n = 1;
  while (n < (g_profile ? 2u : 4u) && chance(r, g_profile ? 4 : 2)) n++;
  for (i = 0; i < n; ++i) {
    const kf_site_t* s = pick_site(r, &m);
    if (!s) break;
    mutate_site(r, &m, s, data);
    done = 1;
  }
  model_free(&m);
  free(copy);
  return done;
}

size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  kf_rng_t r;
  r.s = seed * 0x2545f4914f6cdd1dull + size;
  if (rnd(&r, 100) >= k_generic_percent[g_profile]) {
    if (mutate_structured(&r, data, size)) {
      if (!chance(&r, 32)) kf_reseal(data, size);
      return size;
    }
    /* The invoke profile starts over from a seed rather than mutate bytes
     * that no longer parse (and so would not load, let alone run). */
    if (g_profile && g_seed_count) {
      const kf_seed_t* s = &g_seeds[rnd(&r, (uint32_t)g_seed_count)];
      if (s->size <= max_size) {
        memcpy(data, s->data, s->size);
        size = s->size;
        if (mutate_structured(&r, data, size)) kf_reseal(data, size);
        return size;
      }
    }
  }
  size = LLVMFuzzerMutate(data, size, max_size);
  if (!chance(&r, 8)) kf_reseal(data, size);
  return size;
}

/* Crossover: a span of whole instructions of one module's function replaced
 * by an equally long span of the other's; when there is none, a structured
 * mutation of the first, and when that does not parse either, a run of bytes
 * copied from the second input at the same offset. The result has the first
 * input's length and a recomputed checksum. */
size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1, const uint8_t* data2,
                                 size_t size2, uint8_t* out, size_t max_out_size,
                                 unsigned int seed);
size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1, const uint8_t* data2,
                                 size_t size2, uint8_t* out, size_t max_out_size,
                                 unsigned int seed) {
  kf_rng_t r;
  kf_model_t m1, m2;
  uint8_t *c1 = NULL, *c2 = NULL;
  int crossed = 0;
  r.s = seed * 0x9e3779b97f4a7c15ull + size1 + size2;
  if (size1 > max_out_size || size1 == 0) return 0;
  memcpy(out, data1, size1);
  c1 = kf_aligned_copy(data1, size1);
  c2 = kf_aligned_copy(data2, size2);
  if (c1 && c2 && model_build(&m1, c1, size1)) {
    if (model_build(&m2, c2, size2)) {
      if (m1.instrs.len && m2.instrs.len) {
        const kf_site_t* in1 = (const kf_site_t*)m1.instrs.items;
        const kf_site_t* in2 = (const kf_site_t*)m2.instrs.items;
        uint32_t tries;
        for (tries = 0; tries < 16 && !crossed; ++tries) {
          size_t a = rnd(&r, (uint32_t)m1.instrs.len), b = rnd(&r, (uint32_t)m2.instrs.len);
          uint32_t ca, cb = 1 + rnd(&r, 4), want;
          while (cb > 1 && !span_words(&m2, b, cb)) cb--;
          want = span_words(&m2, b, cb);
          for (ca = 1; ca <= 8 && !crossed; ++ca) {
            uint32_t have = span_words(&m1, a, ca);
            if (!have || have > want) break;
            if (have == want) {
              memcpy(out + in1[a].off, data2 + in2[b].off, 4u * want);
              crossed = 1;
            }
          }
        }
      }
      model_free(&m2);
    }
    model_free(&m1);
  }
  if (!crossed && !mutate_structured(&r, out, size1) && size2) {
    size_t at = rnd(&r, (uint32_t)size1), n = 1 + rnd(&r, 64);
    if (at < size2) {
      if (n > size1 - at) n = size1 - at;
      if (n > size2 - at) n = size2 - at;
      memcpy(out + at, data2 + at, n);
    }
  }
  free(c1);
  free(c2);
  kf_reseal(out, size1);
  return size1;
}
