#ifndef TOLLGATE_CRC_FOLD_H
#define TOLLGATE_CRC_FOLD_H

#include <stddef.h>
#include <stdint.h>

/// Whether this CPU has carry-less multiplication (x86-64 PCLMULQDQ); 0 elsewhere.
int tollgate_crc_fold_available(void);

/// Folds `count` bytes (a multiple of 64, at least 64) of a reflected CRC's message into 16
/// bytes with the same remainder: `register_` (the CRC register, at most 64 bits, as the
/// table-driven update holds it) is XORed into the first bytes, then every 16-byte block is
/// multiplied forward by carry-less multiplication, four blocks at a time. `constants` holds,
/// for D = 512, 128, 384 and 256 bits in that order, the pair (x^(D+63) mod P, x^(D-1) mod P),
/// each bit-reflected into 64 bits. The 16 bytes written to `out` are a message whose CRC,
/// from a zero register, is the CRC of `bytes` from `register_` (see ReflectedCRC).
/// Only call when `tollgate_crc_fold_available()` is 1.
void tollgate_crc_fold(const uint64_t constants[8], uint64_t register_, const uint8_t *bytes, size_t count,
                       uint8_t out[16]);

#endif
