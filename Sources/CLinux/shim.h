#ifndef TOLLGATE_CLINUX_SHIM_H
#define TOLLGATE_CLINUX_SHIM_H

#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <errno.h>

/// cachestat(2), Linux 6.5 and later: its number is the same on every architecture.
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

struct tollgate_cachestat_range { uint64_t off; uint64_t len; };
struct tollgate_cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/// How many pages of bytes [offset, offset + length) of `fd` are in the page cache, by
/// cachestat(2) (glibc has no wrapper, and Swift cannot call the variadic syscall(2)).
/// 0 on success; -1 with errno set (ENOSYS before Linux 6.5, or where a sandbox forbids it).
static inline int tollgate_cached_pages(int fd, uint64_t offset, uint64_t length, uint64_t *cached) {
    struct tollgate_cachestat_range range = { offset, length };
    struct tollgate_cachestat stat;
    if (syscall(__NR_cachestat, fd, &range, &stat, 0) != 0) return -1;
    *cached = stat.nr_cache;
    return 0;
}

/// preadv2(2) flag: fail with EAGAIN rather than wait for data that is not in the page cache.
#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
#endif
#ifndef __NR_preadv2
#if defined(__x86_64__)
#define __NR_preadv2 327
#elif defined(__aarch64__)
#define __NR_preadv2 286
#endif
#endif

/// Reads up to `count` bytes at `offset` only from the page cache: preadv2(2) with RWF_NOWAIT
/// (Linux 4.14), which returns what is cached from `offset` on and never waits on the disk
/// (glibc's wrapper needs _GNU_SOURCE, which Swift's Glibc module is not built with). The bytes
/// read, or -1 with errno set (EAGAIN: none of them cached; EOPNOTSUPP or ENOSYS: no such read).
static inline long tollgate_pread_nowait(int fd, void *buffer, unsigned long count, int64_t offset) {
#ifdef __NR_preadv2
    struct { void *base; unsigned long length; } vector = { buffer, count };
    return syscall(__NR_preadv2, fd, &vector, 1, (unsigned long)offset, 0UL, RWF_NOWAIT);
#else
    (void)fd; (void)buffer; (void)count; (void)offset;
    errno = ENOSYS;
    return -1;
#endif
}

/// Fixes glibc's mmap threshold at `bytes` (M_MMAP_THRESHOLD; setting it also stops glibc from
/// raising it by itself), through mallopt(3), which Swift's Glibc module does not bring.
/// 1 on success. Elsewhere than glibc, nothing: 0.
#if defined(__GLIBC__)
#include <malloc.h>
static inline int tollgate_fix_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }
#else
static inline int tollgate_fix_mmap_threshold(int bytes) { (void)bytes; return 0; }
#endif

#endif
