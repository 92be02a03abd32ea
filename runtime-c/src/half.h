/* Scalar conversions between float and the 16-bit float types (IEEE binary16
 * and bfloat16), for the runtime's host-side scalar ops and printing; kernels
 * convert in their own code. float -> half rounds to nearest even; a NaN stays
 * a (quiet) NaN. */
#ifndef KILN_HALF_H
#define KILN_HALF_H

#include <stdint.h>
#include <string.h>

static inline float kiln_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  float f;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    f = (float)man / 16777216.0f; /* man * 2^-24 */
    return sign ? -f : f;
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t kiln_float_to_half(float f) {
  uint32_t bits, sign, man;
  int32_t exp;
  memcpy(&bits, &f, sizeof bits);
  sign = (bits >> 16) & 0x8000u;
  exp = (int32_t)((bits >> 23) & 0xff) - 127 + 15;
  man = bits & 0x7fffffu;
  if (((bits >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
  if (exp >= 0x1f) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    uint32_t shift, half_man, rem, halfway;
    if (exp < -10) return (uint16_t)sign;
    man |= 0x800000u;
    shift = (uint32_t)(14 - exp);
    half_man = man >> shift;
    rem = man & ((1u << shift) - 1);
    halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_man & 1))) half_man++;
    return (uint16_t)(sign | half_man);
  }
  {
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)h;
  }
}

static inline float kiln_bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t kiln_float_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1);
  return (uint16_t)(bits >> 16);
}

#endif
