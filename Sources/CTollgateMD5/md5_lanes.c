// Multi-buffer MD5: eight independent streams hashed in the eight 32-bit lanes of AVX2
// registers, one 64-byte block of each per round (the technique of Intel's multi-buffer
// hashing and of MinIO's md5-simd). MD5's steps form one serial chain per stream, which a
// single stream cannot spread over a core's vector units; eight streams fill them. Everything
// else (a lone stream, padding, the final digest) is libcrypto's MD5, on the same state.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "md5_lanes.h"
#include <openssl/md5.h>
#include <stddef.h>
#include <string.h>

_Static_assert(sizeof(tollgate_md5_ctx) == sizeof(MD5_CTX), "tollgate_md5_ctx is MD5_CTX");
_Static_assert(offsetof(tollgate_md5_ctx, Nl) == offsetof(MD5_CTX, Nl), "tollgate_md5_ctx is MD5_CTX");
_Static_assert(offsetof(tollgate_md5_ctx, num) == offsetof(MD5_CTX, num), "tollgate_md5_ctx is MD5_CTX");

void tollgate_md5_init(tollgate_md5_ctx *ctx) { MD5_Init((MD5_CTX *)ctx); }
void tollgate_md5_update(tollgate_md5_ctx *ctx, const void *bytes, size_t count) { MD5_Update((MD5_CTX *)ctx, bytes, count); }
void tollgate_md5_final(tollgate_md5_ctx *ctx, uint8_t digest[16]) { MD5_Final(digest, (MD5_CTX *)ctx); }

static size_t fewest_blocks(const tollgate_md5_lane *lanes, int count, size_t limit) {
    size_t rounds = limit;
    for (int i = 0; i < count; i++) if (lanes[i].blocks < rounds) rounds = lanes[i].blocks;
    return rounds;
}

/// One lane: libcrypto, piece by piece (a block split between pieces waits in the state).
static size_t single_lane(tollgate_md5_lane *lane, size_t rounds) {
    size_t left = rounds * 64;
    while (left > 0) {
        while (lane->offset == lane->pieces[lane->piece].count) { lane->piece++; lane->offset = 0; }
        const tollgate_md5_piece *piece = &lane->pieces[lane->piece];
        size_t take = piece->count - lane->offset;
        if (take > left) take = left;
        MD5_Update((MD5_CTX *)lane->ctx, piece->bytes + lane->offset, take);
        lane->offset += take;
        left -= take;
    }
    lane->blocks -= rounds;
    return rounds;
}

#if defined(__x86_64__)
#include <immintrin.h>

/// The next block of `lane`: in place when one piece holds it, else gathered into `scratch`.
static const uint8_t *next_block(tollgate_md5_lane *lane, uint8_t scratch[64]) {
    while (lane->offset == lane->pieces[lane->piece].count) { lane->piece++; lane->offset = 0; }
    const tollgate_md5_piece *piece = &lane->pieces[lane->piece];
    if (piece->count - lane->offset >= 64) {
        const uint8_t *block = piece->bytes + lane->offset;
        lane->offset += 64;
        return block;
    }
    size_t filled = 0;
    while (filled < 64) {
        while (lane->offset == lane->pieces[lane->piece].count) { lane->piece++; lane->offset = 0; }
        piece = &lane->pieces[lane->piece];
        size_t take = piece->count - lane->offset;
        if (take > 64 - filled) take = 64 - filled;
        memcpy(scratch + filled, piece->bytes + lane->offset, take);
        filled += take;
        lane->offset += take;
    }
    return scratch;
}

/// Adds `bytes` to the stream length kept in the state, as MD5_Update does.
static void count_bytes(tollgate_md5_ctx *ctx, size_t bytes) {
    uint32_t low = ctx->Nl + (uint32_t)(bytes << 3);
    if (low < ctx->Nl) ctx->Nh++;
    ctx->Nh += (uint32_t)(bytes >> 29);
    ctx->Nl = low;
}

int tollgate_md5_best_kernel(void) {
    if (__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512f")) return 2;
    return __builtin_cpu_supports("avx2") ? 1 : 0;
}

/// Words 0-7 (`half` 0) or 8-15 of the eight blocks, transposed: out[j] holds word j of each.
__attribute__((target("avx2")))
static inline void transpose(const uint8_t *const blocks[8], int half, __m256i out[8]) {
    __m256i r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_si256((const __m256i *)(blocks[i] + 32 * half));
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int j = 0; j < 4; j++) {
        out[j] = _mm256_permute2x128_si256(u[j], u[j + 4], 0x20);
        out[j + 4] = _mm256_permute2x128_si256(u[j], u[j + 4], 0x31);
    }
}

// AVX2: rotations by two shifts, the round functions by and/or/xor.
#define LANES_NAME eight_lanes_avx2
#define LANES_TARGET __attribute__((target("avx2")))
#define ROTL(x, s) _mm256_or_si256(_mm256_slli_epi32(x, s), _mm256_srli_epi32(x, 32 - (s)))
#define NOT(x) _mm256_xor_si256(x, _mm256_set1_epi32(-1))
#define F(b, c, d) _mm256_xor_si256(d, _mm256_and_si256(b, _mm256_xor_si256(c, d)))
#define G(b, c, d) _mm256_xor_si256(c, _mm256_and_si256(d, _mm256_xor_si256(b, c)))
#define H(b, c, d) _mm256_xor_si256(_mm256_xor_si256(b, c), d)
#define I(b, c, d) _mm256_xor_si256(c, _mm256_or_si256(b, NOT(d)))
#include "md5_lanes_kernel.h"
#undef LANES_NAME
#undef LANES_TARGET
#undef ROTL
#undef NOT
#undef F
#undef G
#undef H
#undef I

// AVX-512VL on the same 256-bit registers: one rotate, and each round function one ternary
// logic op (its immediate is the function's truth table over b, c, d).
#define LANES_NAME eight_lanes_avx512
#define LANES_TARGET __attribute__((target("avx2,avx512f,avx512vl")))
#define ROTL(x, s) _mm256_rol_epi32(x, s)
#define F(b, c, d) _mm256_ternarylogic_epi32(b, c, d, 0xCA)
#define G(b, c, d) _mm256_ternarylogic_epi32(b, c, d, 0xE4)
#define H(b, c, d) _mm256_ternarylogic_epi32(b, c, d, 0x96)
#define I(b, c, d) _mm256_ternarylogic_epi32(b, c, d, 0x39)
#include "md5_lanes_kernel.h"
#undef LANES_NAME
#undef LANES_TARGET
#undef ROTL
#undef F
#undef G
#undef H
#undef I

size_t tollgate_md5_lanes(tollgate_md5_lane *lanes, int count, size_t limit, int kernel) {
    if (count > TOLLGATE_MD5_LANES) count = TOLLGATE_MD5_LANES;
    size_t rounds = fewest_blocks(lanes, count, limit);
    if (rounds == 0) return 0;
    if (count < tollgate_md5_fewest_lanes || kernel == 0) {
        for (int i = 0; i < count; i++) single_lane(&lanes[i], rounds);
        return rounds;
    }
    return kernel == 2 ? eight_lanes_avx512(lanes, count, rounds) : eight_lanes_avx2(lanes, count, rounds);
}

#else

int tollgate_md5_best_kernel(void) { return 0; }

size_t tollgate_md5_lanes(tollgate_md5_lane *lanes, int count, size_t limit, int kernel) {
    (void)kernel;
    size_t rounds = fewest_blocks(lanes, count, limit);
    for (int i = 0; i < count && rounds > 0; i++) single_lane(&lanes[i], rounds);
    return rounds;
}

#endif
