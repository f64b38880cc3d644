#ifndef TOLLGATE_MD5_LANES_H
#define TOLLGATE_MD5_LANES_H

#include <stddef.h>
#include <stdint.h>

/// libcrypto's MD5 state (`MD5_CTX` of <openssl/md5.h>), laid out the same (checked in
/// md5_lanes.c), so that Swift can allocate it without the deprecated header.
typedef struct {
    uint32_t A, B, C, D, Nl, Nh, data[16];
    uint32_t num;
} tollgate_md5_ctx;

/// MD5_Init, MD5_Update and MD5_Final of libcrypto.
void tollgate_md5_init(tollgate_md5_ctx *ctx);
void tollgate_md5_update(tollgate_md5_ctx *ctx, const void *bytes, size_t count);
void tollgate_md5_final(tollgate_md5_ctx *ctx, uint8_t digest[16]);

/// Bytes of one stream, in order; a block may straddle two pieces.
typedef struct {
    const uint8_t *bytes;
    size_t count;
} tollgate_md5_piece;

/// One stream's share of a multi-buffer pass: its state (at a block boundary: `num` 0), its
/// bytes as pieces read from `piece`/`offset` on, and the whole blocks still to hash.
typedef struct {
    tollgate_md5_ctx *ctx;
    const tollgate_md5_piece *pieces;
    size_t piece;
    size_t offset;
    size_t blocks;
} tollgate_md5_lane;

/// The most lanes one pass takes.
#define TOLLGATE_MD5_LANES 8

/// Below this many lanes, a pass hashes them one after the other with libcrypto: two lanes
/// in eight-wide registers are no faster than libcrypto's MD5 on each.
static const int tollgate_md5_fewest_lanes = 3;

/// The fastest kernel this CPU runs: 2 AVX-512VL, 1 AVX2, 0 none (libcrypto, one lane at a time).
int tollgate_md5_best_kernel(void);

/// Hashes the next min(`limit`, fewest `blocks` of any lane) blocks of each of `count` lanes
/// (1 ... TOLLGATE_MD5_LANES, each a different state) with `kernel` (at most the best), advancing
/// their cursors, `blocks` and lengths; returns how many blocks each lane got.
size_t tollgate_md5_lanes(tollgate_md5_lane *lanes, int count, size_t limit, int kernel);

#endif
