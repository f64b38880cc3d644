// Carry-less multiplication folding for reflected CRCs (Intel, "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ Instruction", 2009), with the final reduction left to the
// table-driven code in ReflectedCRC: the 16 folded bytes go through its tables from a zero
// register. Constants come from ReflectedCRC, so one routine serves all four CRCs.
#include "crc_fold.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

int tollgate_crc_fold_available(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    return (ecx & bit_PCLMUL) != 0 && (ecx & bit_SSE4_1) != 0;
}

// The 128-bit state s holds the polynomial S in reflected order (its low 64 bits the first in
// the message, S's high half). S·x^D ≡ hi(S)·x^(D+64) + lo(S)·x^D, and a carry-less product of
// two reflected 64-bit values is the reflected product times x: hence x^(D+63) and x^(D-1).
__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold(__m128i s, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(s, k, 0x00), _mm_clmulepi64_si128(s, k, 0x11));
}

__attribute__((target("pclmul,sse4.1")))
void tollgate_crc_fold(const uint64_t constants[8], uint64_t register_, const uint8_t *bytes, size_t count,
                       uint8_t out[16]) {
    const __m128i by512 = _mm_set_epi64x((long long)constants[1], (long long)constants[0]);
    const __m128i by128 = _mm_set_epi64x((long long)constants[3], (long long)constants[2]);
    const __m128i by384 = _mm_set_epi64x((long long)constants[5], (long long)constants[4]);
    const __m128i by256 = _mm_set_epi64x((long long)constants[7], (long long)constants[6]);
    const __m128i *p = (const __m128i *)bytes;
    __m128i s0 = _mm_xor_si128(_mm_loadu_si128(p), _mm_cvtsi64_si128((long long)register_));
    __m128i s1 = _mm_loadu_si128(p + 1);
    __m128i s2 = _mm_loadu_si128(p + 2);
    __m128i s3 = _mm_loadu_si128(p + 3);
    size_t blocks = count / 64;
    for (size_t i = 1; i < blocks; i++) {
        p += 4;
        s0 = _mm_xor_si128(fold(s0, by512), _mm_loadu_si128(p));
        s1 = _mm_xor_si128(fold(s1, by512), _mm_loadu_si128(p + 1));
        s2 = _mm_xor_si128(fold(s2, by512), _mm_loadu_si128(p + 2));
        s3 = _mm_xor_si128(fold(s3, by512), _mm_loadu_si128(p + 3));
    }
    // The four lanes, each moved to the end of the last: 384, 256 and 128 bits on.
    __m128i s = _mm_xor_si128(_mm_xor_si128(fold(s0, by384), fold(s1, by256)), _mm_xor_si128(fold(s2, by128), s3));
    _mm_storeu_si128((__m128i *)out, s);
}

#else

int tollgate_crc_fold_available(void) { return 0; }

void tollgate_crc_fold(const uint64_t constants[8], uint64_t register_, const uint8_t *bytes, size_t count,
                       uint8_t out[16]) {
    (void)constants; (void)register_; (void)bytes; (void)count; (void)out;
    __builtin_trap();
}

#endif
