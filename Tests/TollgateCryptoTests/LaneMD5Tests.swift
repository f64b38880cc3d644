import CTollgateMD5
import Foundation
import Synchronization
import Testing
@testable import TollgateCrypto

/// Multi-buffer MD5 against libcrypto's one-shot MD5: every kernel this CPU runs, any number of
/// lanes, blocks split between pieces, and streams hashed concurrently through `MD5Lanes`.
@Suite("Multi-buffer MD5")
struct LaneMD5Tests {
    /// Deterministic bytes (xorshift), different per seed.
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var x = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        return (0..<count).map { _ in
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            return UInt8(truncatingIfNeeded: x)
        }
    }

    /// `data` cut at `cuts` (sorted offsets), as buffers of one stream.
    static func pieces(_ data: UnsafeRawBufferPointer, cuts: [Int]) -> [UnsafeRawBufferPointer] {
        var result: [UnsafeRawBufferPointer] = []
        var start = 0
        for cut in cuts + [data.count] {
            result.append(UnsafeRawBufferPointer(rebasing: data[start..<cut]))
            start = cut
        }
        return result
    }

    /// `.ci/run` runs these once pinned to each CPU the machine has (`taskset`). A kernel this CPU
    /// cannot run is reported as skipped, with the reason, rather than passing unseen.
    @Test("the libcrypto kernel (one lane at a time): the digests of libcrypto")
    func portableKernelAgreesWithLibcrypto() throws {
        try Self.kernelAgreesWithLibcrypto(0)
    }

    @Test("the AVX2 kernel: the digests of libcrypto",
          .enabled(if: tollgate_md5_best_kernel() >= 1, "this CPU has no AVX2: the AVX2 MD5 kernel is NOT tested here"))
    func avx2KernelAgreesWithLibcrypto() throws {
        try Self.kernelAgreesWithLibcrypto(1)
    }

    @Test("the AVX-512VL kernel: the digests of libcrypto",
          .enabled(if: tollgate_md5_best_kernel() >= 2, "this CPU has no AVX-512VL: the AVX-512 MD5 kernel is NOT tested here"))
    func avx512KernelAgreesWithLibcrypto() throws {
        try Self.kernelAgreesWithLibcrypto(2)
    }

    /// One to eight lanes, blocks split across pieces, passes of random length.
    static func kernelAgreesWithLibcrypto(_ kernel: Int32) throws {
        var generator = SystemRandomNumberGenerator()
        do {
            for trial in 0..<200 {
                let count = 1 + trial % Int(TOLLGATE_MD5_LANES)
                let streams = (0..<count).map { bytes(64 * Int.random(in: 1...40, using: &generator), seed: UInt64(trial * 8 + $0)) }
                let contexts = (0..<count).map { _ -> UnsafeMutablePointer<tollgate_md5_ctx> in
                    let context = UnsafeMutablePointer<tollgate_md5_ctx>.allocate(capacity: 1)
                    tollgate_md5_init(context)
                    return context
                }
                defer { contexts.forEach { $0.deallocate() } }
                let storages = streams.map { stream in
                    let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: stream.count, alignment: 1)
                    stream.withUnsafeBytes { storage.copyMemory(from: $0) }
                    return storage
                }
                defer { storages.forEach { $0.deallocate() } }
                let described = storages.map { storage in
                    let cuts = [Int.random(in: 0...storage.count, using: &generator), Int.random(in: 0...storage.count, using: &generator)].sorted()
                    return pieces(UnsafeRawBufferPointer(storage), cuts: cuts).map {
                        tollgate_md5_piece(bytes: $0.baseAddress?.assumingMemoryBound(to: UInt8.self), count: $0.count)
                    }
                }
                let pieceArrays = described.map { pieces in
                    let array = UnsafeMutablePointer<tollgate_md5_piece>.allocate(capacity: pieces.count)
                    array.initialize(from: pieces, count: pieces.count)
                    return array
                }
                defer { pieceArrays.forEach { $0.deallocate() } }
                var live = (0..<count).map {
                    tollgate_md5_lane(ctx: contexts[$0], pieces: pieceArrays[$0], piece: 0, offset: 0, blocks: streams[$0].count / 64)
                }
                // Passes of random length; finished lanes leave, as `MD5Lanes` drops them.
                while !live.isEmpty {
                    let done = tollgate_md5_lanes(&live, Int32(live.count), Int.random(in: 1...16, using: &generator), kernel)
                    #expect(done >= 1)
                    live.removeAll { $0.blocks == 0 }
                }
                for index in 0..<count {
                    var digest = [UInt8](repeating: 0, count: 16)
                    tollgate_md5_update(contexts[index], "tail", 4)
                    tollgate_md5_final(contexts[index], &digest)
                    #expect(digest == (try Crypto.md5(streams[index] + Array("tail".utf8))), "kernel \(kernel), lane \(index) of \(count)")
                }
            }
        }
    }

    @Test("LaneMD5: updates of any size and split, small and shared, give libcrypto's MD5")
    func streamUpdates() throws {
        let data = Self.bytes(300_000, seed: 42)
        // Sizes below and above the shared threshold, block-aligned or not, several pieces each.
        let plans: [[[Int]]] = [
            [[1], [63], [64], [65]],
            [[17_000], [40_000, 3, 9_000], [1, 1, 100_000]],
            [[LaneMD5.smallestShared], [LaneMD5.smallestShared + 63], [5, LaneMD5.smallestShared * 2]],
            [[131_071, 1], [7], [64 * 1024, 64 * 1024 + 1]],
        ]
        for lanes in [MD5Lanes.shared, nil] {
            for plan in plans {
                let md5 = LaneMD5(lanes: lanes)
                var offset = 0
                data.withUnsafeBytes { all in
                    for update in plan {
                        var pieces: [UnsafeRawBufferPointer] = []
                        for size in update {
                            pieces.append(UnsafeRawBufferPointer(rebasing: all[offset..<(offset + size)]))
                            offset += size
                        }
                        md5.update(pieces)
                    }
                }
                #expect(md5.finalize() == (try Crypto.md5(data.prefix(offset))), "plan \(plan), lanes \(lanes != nil)")
            }
        }
    }

    @Test("sixteen streams at once share passes, and each gets its own digest")
    func concurrentStreamsShareLanes() throws {
        let streams = (0..<16).map { Self.bytes(2 * 1024 * 1024 + $0 * 777, seed: UInt64(1000 + $0)) }
        let results = Mutex([Int: [UInt8]]())
        // A thread each (the pool of concurrentPerform has only as many as the CPU has cores).
        let finished = DispatchGroup()
        for index in streams.indices {
            finished.enter()
            Thread {
                let md5 = LaneMD5()
                streams[index].withUnsafeBytes { all in
                    var offset = 0
                    while offset < all.count {
                        let size = min(256 * 1024 + index, all.count - offset)
                        md5.update([UnsafeRawBufferPointer(rebasing: all[offset..<(offset + size)])])
                        offset += size
                    }
                }
                let digest = md5.finalize()
                results.withLock { $0[index] = digest }
                finished.leave()
            }.start()
        }
        finished.wait()
        for (index, stream) in streams.enumerated() {
            let digest = results.withLock { $0[index] }
            #expect(digest == (try Crypto.md5(stream)))
        }
        if let lanes = MD5Lanes.shared {
            // Sixteen threads each wait on their own update: the thread of the lanes sees them together.
            #expect(lanes.statistics.widest >= Int(tollgate_md5_fewest_lanes))
        }
    }

    @Test("lane threads start with the first update and end with stop; updates after it are hashed in place")
    func lanesStartAndStop() throws {
        let kernel = tollgate_md5_best_kernel()
        guard kernel > 0 else { return }
        let lanes = MD5Lanes(kernel: kernel, threads: 3)
        #expect(lanes.threadsRunning == 0)
        let data = Self.bytes(200_000, seed: 7)
        func digest() -> [UInt8] {
            let md5 = LaneMD5(lanes: lanes)
            data.withUnsafeBytes { md5.update([$0]) }
            return md5.finalize()
        }
        #expect(digest() == (try Crypto.md5(data)))
        #expect(lanes.threadsRunning == 3)
        lanes.stop()
        #expect(lanes.threadsRunning == 0)
        let passes = lanes.statistics.passes
        #expect(digest() == (try Crypto.md5(data)))
        #expect(lanes.statistics.passes == passes, "hashed on the caller's thread")
    }
}

@Suite struct ProcessCPUsTests {
    @Test("a cgroup quota, v2 or v1, in CPUs rounded up; none, or text that is not one: nil", arguments: [
        ("max 100000", nil, nil, nil),
        ("50000 100000", nil, nil, 1),
        ("150000 100000\n", nil, nil, 2),
        ("200000 100000", nil, nil, 2),
        ("0 100000", nil, nil, nil),
        ("lots", "200000", "100000", 2),
        (nil, "-1", "100000", nil),
        (nil, "250000\n", "100000\n", 3),
        (nil, "100000", "0", nil),
        (nil, nil, nil, nil),
    ] as [(String?, String?, String?, Int?)])
    func quota(v2: String?, v1Quota: String?, v1Period: String?, cpus: Int?) {
        #expect(ProcessCPUs.quota(cgroupV2: v2, v1Quota: v1Quota, v1Period: v1Period) == cpus)
    }

    @Test func cgroupDirectoryFromProcSelfCgroup() {
        #expect(ProcessCPUs.cgroupDirectory(selfCgroup: "0::/system.slice/tollgate.service\n") == "/sys/fs/cgroup/system.slice/tollgate.service")
        #expect(ProcessCPUs.cgroupDirectory(selfCgroup: "0::/\n") == "/sys/fs/cgroup")
        #expect(ProcessCPUs.cgroupDirectory(selfCgroup: "12:cpu,cpuacct:/docker/abc\n") == "/sys/fs/cgroup")
        #expect(ProcessCPUs.cgroupDirectory(selfCgroup: "0::/../../etc") == "/sys/fs/cgroup")
        #expect(ProcessCPUs.cgroupDirectory(selfCgroup: nil) == "/sys/fs/cgroup")
    }

    @Test func cpusAllowedList() {
        #expect(ProcessCPUs.allowedCPUs(status: "Name:\ttollgate\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n") == 2)
        #expect(ProcessCPUs.allowedCPUs(status: "Cpus_allowed_list:\t0-3,8,10-11\n") == 7)
        #expect(ProcessCPUs.allowedCPUs(status: "Cpus_allowed_list:\t5\n") == 1)
        #expect(ProcessCPUs.allowedCPUs(status: "Cpus_allowed_list:\t3-1\n") == nil)
        #expect(ProcessCPUs.allowedCPUs(status: "Cpus_allowed_list:\tx\n") == nil)
        #expect(ProcessCPUs.allowedCPUs(status: "Name:\ttollgate\n") == nil)
    }

    @Test func theCountIsTheAffinityMaskOrFewer() throws {
        let affinity = try #require(ProcessCPUs.affinityCount())
        #expect(affinity >= 1 && affinity <= ProcessInfo.processInfo.processorCount)
        #expect((1...affinity).contains(ProcessCPUs.count()))
    }
}
