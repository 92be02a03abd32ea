/* numpy .npz archives: zip files of NAME.npy entries.
 *
 * Reading uses the central directory (numpy.savez writes zip64 local headers
 * whose sizes live in extra fields; the central directory has them too) and
 * accepts only stored entries. Writing produces a plain stored zip with fixed
 * timestamps, so the same arrays give the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "kiln_io.h"
#include "status_internal.h"

static uint16_t rd16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t* p) { return rd32(p) | ((uint64_t)rd32(p + 4) << 32); }
static void wr16(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void wr32(uint8_t* p, uint32_t v) {
  wr16(p, v & 0xffff);
  wr16(p + 2, v >> 16);
}

static kiln_status_t kiln_bad_zip(const char* what, const char* problem) {
  return kiln_make_status(KILN_INVALID_ARGUMENT, "'%s' is not a valid .npz file: %s",
                          what, problem);
}

void kiln_npz_free(kiln_npz_t* npz) {
  if (!npz) return;
  for (size_t i = 0; i < npz->count; ++i) {
    free(npz->entries[i].name);
    kiln_buffer_view_release(npz->entries[i].value);
  }
  free(npz->entries);
  npz->entries = NULL;
  npz->count = 0;
}

kiln_status_t kiln_npz_decode(const uint8_t* data, size_t size, const char* what,
                              kiln_npz_t* out) {
  out->count = 0;
  out->entries = NULL;
  if (!what) what = "<memory>";
  /* End of central directory: 22 bytes plus a comment of up to 65535. */
  if (size < 22) return kiln_bad_zip(what, "too short for a zip archive");
  size_t eocd = SIZE_MAX;
  size_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  for (size_t pos = size - 22 + 1; pos-- > lowest;) {
    if (rd32(data + pos) == 0x06054b50u && pos + 22 + rd16(data + pos + 20) == size) {
      eocd = pos;
      break;
    }
  }
  if (eocd == SIZE_MAX) {
    return kiln_bad_zip(what, "no end-of-central-directory record (not a zip archive)");
  }
  uint64_t entries = rd16(data + eocd + 10);
  uint64_t cd_size = rd32(data + eocd + 12);
  uint64_t cd_offset = rd32(data + eocd + 16);
  if (entries == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu) {
    /* zip64: the locator sits just before the end record. */
    if (eocd < 20 || rd32(data + eocd - 20) != 0x07064b50u) {
      return kiln_bad_zip(what, "zip64 end-of-central-directory locator is missing");
    }
    uint64_t rec = rd64(data + eocd - 20 + 8);
    if (rec > size || size - rec < 56 || rd32(data + rec) != 0x06064b50u) {
      return kiln_bad_zip(what, "zip64 end-of-central-directory record is damaged");
    }
    entries = rd64(data + rec + 32);
    cd_size = rd64(data + rec + 40);
    cd_offset = rd64(data + rec + 48);
  }
  if (cd_offset > size || cd_size > size - cd_offset) {
    return kiln_bad_zip(what, "central directory lies outside the file");
  }
  if (entries > cd_size / 46) {
    return kiln_bad_zip(what, "central directory is too small for its entry count");
  }
  out->entries = calloc(entries ? entries : 1, sizeof(kiln_npz_entry_t));
  if (!out->entries) return kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");

  kiln_status_t status = NULL;
  size_t pos = (size_t)cd_offset;
  const size_t cd_end = (size_t)(cd_offset + cd_size);
  for (uint64_t i = 0; i < entries && !status; ++i) {
    if (cd_end - pos < 46 || rd32(data + pos) != 0x02014b50u) {
      status = kiln_bad_zip(what, "damaged central directory entry");
      break;
    }
    uint16_t flags = rd16(data + pos + 8);
    uint16_t method = rd16(data + pos + 10);
    uint32_t crc = rd32(data + pos + 16);
    uint64_t csize = rd32(data + pos + 20);
    uint64_t usize = rd32(data + pos + 24);
    size_t name_len = rd16(data + pos + 28);
    size_t extra_len = rd16(data + pos + 30);
    size_t comment_len = rd16(data + pos + 32);
    uint64_t local = rd32(data + pos + 42);
    if (cd_end - pos - 46 < name_len + extra_len + comment_len) {
      status = kiln_bad_zip(what, "central directory entry runs past its end");
      break;
    }
    const char* name = (const char*)data + pos + 46;
    char* entry_name = malloc(name_len + 1);
    if (!entry_name) {
      status = kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
      break;
    }
    memcpy(entry_name, name, name_len);
    entry_name[name_len] = '\0';
    /* zip64 extra: only the fields that are 0xffffffff above, in order. */
    const uint8_t* extra = data + pos + 46 + name_len;
    for (size_t e = 0; e + 4 <= extra_len;) {
      uint16_t id = rd16(extra + e), len = rd16(extra + e + 2);
      if (e + 4 + len > extra_len) break;
      if (id == 0x0001) {
        size_t f = e + 4, fend = e + 4 + len;
        if (usize == 0xffffffffu && f + 8 <= fend) { usize = rd64(extra + f); f += 8; }
        if (csize == 0xffffffffu && f + 8 <= fend) { csize = rd64(extra + f); f += 8; }
        if (local == 0xffffffffu && f + 8 <= fend) { local = rd64(extra + f); f += 8; }
      }
      e += 4 + (size_t)len;
    }
    pos += 46 + name_len + extra_len + comment_len;

    kiln_npz_entry_t* entry = &out->entries[out->count];
    entry->name = entry_name;
    out->count++;
    size_t stem = name_len;
    if (stem >= 4 && !strcmp(entry_name + stem - 4, ".npy")) entry_name[stem - 4] = '\0';

    if (flags & 1) {
      status = kiln_make_status(KILN_INVALID_ARGUMENT,
                                "'%s': entry '%s' is encrypted; only stored "
                                "entries are supported",
                                what, name_len ? entry_name : "");
      break;
    }
    if (method != 0) {
      status = kiln_make_status(KILN_UNIMPLEMENTED,
                                "'%s': entry '%s.npy' is compressed (zip method "
                                "%u%s); only stored entries are supported: save "
                                "with numpy.savez, not numpy.savez_compressed",
                                what, entry_name, method,
                                method == 8 ? ", deflate" : "");
      break;
    }
    if (csize != usize) {
      status = kiln_bad_zip(what, "a stored entry's compressed and uncompressed "
                                  "sizes differ");
      break;
    }
    if (local > size || size - local < 30 || rd32(data + local) != 0x04034b50u) {
      status = kiln_bad_zip(what, "an entry's local header lies outside the file");
      break;
    }
    size_t data_start = (size_t)local + 30 + rd16(data + local + 26) +
                        rd16(data + local + 28);
    if (data_start > size || usize > size - data_start) {
      status = kiln_make_status(KILN_DATA_LOSS,
                                "'%s': entry '%s.npy' is truncated: expected %llu "
                                "bytes of data",
                                what, entry_name, (unsigned long long)usize);
      break;
    }
    const uint8_t* payload = data + data_start;
    uint32_t actual = kiln_crc32(0, payload, (size_t)usize);
    if (actual != crc) {
      status = kiln_make_status(KILN_DATA_LOSS,
                                "'%s': entry '%s.npy' is damaged: CRC-32 expected "
                                "%08x, got %08x",
                                what, entry_name, crc, actual);
      break;
    }
    size_t label_len = strlen(what) + strlen(entry_name) + 8;
    char* label = malloc(label_len);
    if (!label) {
      status = kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
      break;
    }
    snprintf(label, label_len, "%s:%s.npy", what, entry_name);
    status = kiln_npy_decode(payload, (size_t)usize, label, &entry->value);
    free(label);
  }
  if (status) {
    kiln_npz_free(out);
    return status;
  }
  return NULL;
}

kiln_status_t kiln_npz_read_file(const char* path, kiln_npz_t* out) {
  out->count = 0;
  out->entries = NULL;
  uint8_t* data = NULL;
  size_t size = 0;
  kiln_status_t status = kiln_io_read_file(path, &data, &size);
  if (status) return status;
  status = kiln_npz_decode(data, size, path, out);
  free(data);
  return status;
}

#define KILN_ZIP_DOS_DATE 0x0021u /* 1980-01-01 */
#define KILN_ZIP32_MAX 0xffffffffu

static void wr64(uint8_t* p, uint64_t v) {
  wr32(p, (uint32_t)v);
  wr32(p + 4, (uint32_t)(v >> 32));
}

kiln_status_t kiln_npz_encode(size_t count, const char* const* names,
                              const kiln_buffer_view_t* const* values,
                              uint8_t** out, size_t* out_size) {
  return kiln_npz_encode_zip64(count, names, values, 0, out, out_size);
}

kiln_status_t kiln_npz_encode_zip64(size_t count, const char* const* names,
                                    const kiln_buffer_view_t* const* values,
                                    int force_zip64, uint8_t** out, size_t* out_size) {
  *out = NULL;
  *out_size = 0;
  uint8_t** encoded = calloc(count ? count : 1, sizeof(uint8_t*));
  size_t* sizes = calloc(count ? count : 1, sizeof(size_t));
  uint64_t* offsets = calloc(count ? count : 1, sizeof(uint64_t));
  uint8_t* buf = NULL;
  kiln_status_t status = NULL;
  if (!encoded || !sizes || !offsets) {
    status = kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  /* Encode every array, then decide on zip64: it is needed once a size or
   * an offset no longer fits 32 bits, or for more than 65535 entries. */
  uint64_t data_total = 0;
  for (size_t i = 0; i < count; ++i) {
    size_t name_len = strlen(names[i]) + 4;
    if (name_len > 0xffff) {
      status = kiln_make_status(KILN_INVALID_ARGUMENT,
                                "array name '%.40s...' is too long for a zip entry",
                                names[i]);
      goto done;
    }
    status = kiln_npy_encode(values[i], &encoded[i], &sizes[i]);
    if (status) goto done;
    data_total += 30 + 20 + name_len + (uint64_t)sizes[i];
  }
  int zip64 = force_zip64 || count > 0xffff || data_total >= KILN_ZIP32_MAX;
  uint64_t local_extra = zip64 ? 20 : 0;   /* id, size, usize, csize */
  uint64_t central_extra = zip64 ? 28 : 0; /* id, size, usize, csize, offset */
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    uint64_t name_len = strlen(names[i]) + 4;
    offsets[i] = total;
    total += 30 + local_extra + name_len + sizes[i];
  }
  uint64_t cd_offset = total;
  for (size_t i = 0; i < count; ++i) total += 46 + central_extra + strlen(names[i]) + 4;
  uint64_t cd_size = total - cd_offset;
  uint64_t eocd64_offset = total;
  total += (zip64 ? 56 + 20 : 0) + 22;
  if (total > SIZE_MAX) {
    status = kiln_make_status(KILN_OUT_OF_MEMORY, "a .npz of %llu bytes is too large here",
                              (unsigned long long)total);
    goto done;
  }
  buf = malloc((size_t)total);
  if (!buf) {
    status = kiln_make_status(KILN_OUT_OF_MEMORY,
                              "out of memory building a .npz of %llu bytes",
                              (unsigned long long)total);
    goto done;
  }
  uint8_t* p = buf;
  uint32_t* crcs = (uint32_t*)calloc(count ? count : 1, sizeof(uint32_t));
  if (!crcs) {
    status = kiln_make_status(KILN_OUT_OF_MEMORY, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < count; ++i) {
    size_t name_len = strlen(names[i]) + 4;
    crcs[i] = kiln_crc32(0, encoded[i], sizes[i]);
    wr32(p, 0x04034b50u);
    wr16(p + 4, zip64 ? 45 : 20);          /* version needed */
    wr16(p + 6, 0);                        /* flags */
    wr16(p + 8, 0);                        /* stored */
    wr16(p + 10, 0);                       /* time */
    wr16(p + 12, KILN_ZIP_DOS_DATE);
    wr32(p + 14, crcs[i]);
    wr32(p + 18, zip64 ? KILN_ZIP32_MAX : (uint32_t)sizes[i]);
    wr32(p + 22, zip64 ? KILN_ZIP32_MAX : (uint32_t)sizes[i]);
    wr16(p + 26, (uint32_t)name_len);
    wr16(p + 28, (uint32_t)local_extra);
    memcpy(p + 30, names[i], name_len - 4);
    memcpy(p + 30 + name_len - 4, ".npy", 4);
    p += 30 + name_len;
    if (zip64) {
      wr16(p, 0x0001);
      wr16(p + 2, 16);
      wr64(p + 4, sizes[i]);
      wr64(p + 12, sizes[i]);
      p += 20;
    }
    if (sizes[i]) memcpy(p, encoded[i], sizes[i]);
    p += sizes[i];
  }
  for (size_t i = 0; i < count; ++i) {
    size_t name_len = strlen(names[i]) + 4;
    wr32(p, 0x02014b50u);
    wr16(p + 4, zip64 ? 45 : 20);          /* made by (MS-DOS attributes) */
    wr16(p + 6, zip64 ? 45 : 20);          /* version needed */
    wr16(p + 8, 0);
    wr16(p + 10, 0);
    wr16(p + 12, 0);
    wr16(p + 14, KILN_ZIP_DOS_DATE);
    wr32(p + 16, crcs[i]);
    wr32(p + 20, zip64 ? KILN_ZIP32_MAX : (uint32_t)sizes[i]);
    wr32(p + 24, zip64 ? KILN_ZIP32_MAX : (uint32_t)sizes[i]);
    wr16(p + 28, (uint32_t)name_len);
    wr16(p + 30, (uint32_t)central_extra);
    wr16(p + 32, 0);                       /* comment */
    wr16(p + 34, 0);                       /* disk */
    wr16(p + 36, 0);                       /* internal attributes */
    wr32(p + 38, 0);                       /* external attributes */
    wr32(p + 42, zip64 ? KILN_ZIP32_MAX : (uint32_t)offsets[i]);
    memcpy(p + 46, names[i], name_len - 4);
    memcpy(p + 46 + name_len - 4, ".npy", 4);
    p += 46 + name_len;
    if (zip64) {
      wr16(p, 0x0001);
      wr16(p + 2, 24);
      wr64(p + 4, sizes[i]);
      wr64(p + 12, sizes[i]);
      wr64(p + 20, offsets[i]);
      p += 28;
    }
  }
  free(crcs);
  if (zip64) {
    wr32(p, 0x06064b50u);                  /* zip64 end of central directory */
    wr64(p + 4, 44);
    wr16(p + 12, 45);
    wr16(p + 14, 45);
    wr32(p + 16, 0);
    wr32(p + 20, 0);
    wr64(p + 24, count);
    wr64(p + 32, count);
    wr64(p + 40, cd_size);
    wr64(p + 48, cd_offset);
    p += 56;
    wr32(p, 0x07064b50u);                  /* its locator */
    wr32(p + 4, 0);
    wr64(p + 8, eocd64_offset);
    wr32(p + 16, 1);
    p += 20;
  }
  wr32(p, 0x06054b50u);
  wr16(p + 4, 0);
  wr16(p + 6, 0);
  wr16(p + 8, zip64 ? 0xffff : (uint32_t)count);
  wr16(p + 10, zip64 ? 0xffff : (uint32_t)count);
  wr32(p + 12, zip64 ? KILN_ZIP32_MAX : (uint32_t)cd_size);
  wr32(p + 16, zip64 ? KILN_ZIP32_MAX : (uint32_t)cd_offset);
  wr16(p + 20, 0);
  p += 22;
  *out = buf;
  *out_size = (size_t)(p - buf);
  buf = NULL;

done:
  if (encoded) {
    for (size_t i = 0; i < count; ++i) free(encoded[i]);
  }
  free(encoded);
  free(sizes);
  free(offsets);
  free(buf);
  return status;
}

kiln_status_t kiln_npz_write_file(const char* path, size_t count,
                                  const char* const* names,
                                  const kiln_buffer_view_t* const* values) {
  uint8_t* data = NULL;
  size_t size = 0;
  kiln_status_t status = kiln_npz_encode(count, names, values, &data, &size);
  if (status) return status;
  status = kiln_io_write_file(path, data, size);
  free(data);
  return status;
}
