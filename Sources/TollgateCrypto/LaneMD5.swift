import CTollgateMD5
import Dispatch
import Foundation

/// The MD5 of one stream of bytes (an object's ETag), in libcrypto's MD5 state, whose large
/// updates are hashed together with other streams' by `MD5Lanes`.
///
/// One MD5 stream is a serial chain of steps, about 4 cycles per byte on one core whatever the
/// core's vector units: it was half of the gateway's CPU per 1 MiB PUT. Eight streams hashed
/// in the lanes of one register cost about as much as two or three hashed alone.
/// Not thread-safe: one writer owns it.
public final class LaneMD5: @unchecked Sendable {
    private let context: UnsafeMutablePointer<tollgate_md5_ctx>
    private let lanes: MD5Lanes?
    /// Updates shorter than this are hashed in place: handing them over would cost more.
    public static let smallestShared = 16 * 1024

    /// `lanes`: where large updates go (`MD5Lanes.shared`, nil on a CPU without AVX2).
    public init(lanes: MD5Lanes? = MD5Lanes.shared) {
        context = .allocate(capacity: 1)
        tollgate_md5_init(context)
        self.lanes = lanes
    }

    deinit { context.deallocate() }

    /// Hashes `pieces`, in order. May block the calling thread while `MD5Lanes` hashes them:
    /// call it where blocking is allowed (the store's blocking-I/O threads).
    public func update(_ pieces: [UnsafeRawBufferPointer]) {
        var pieces = pieces.filter { $0.count > 0 }
        let total = pieces.reduce(0) { $0 + $1.count }
        guard total > 0 else { return }
        guard let lanes, total >= Self.smallestShared else {
            for piece in pieces { tollgate_md5_update(context, piece.baseAddress, piece.count) }
            return
        }
        // A block begun by the previous update is finished in place, and so is the last partial
        // block: the lanes take whole blocks from a block boundary.
        var head = Int(64 - context.pointee.num) % 64
        while head > 0 {
            let take = min(head, pieces[0].count)
            tollgate_md5_update(context, pieces[0].baseAddress, take)
            pieces[0] = UnsafeRawBufferPointer(rebasing: pieces[0][take...])
            if pieces[0].isEmpty { pieces.removeFirst() }
            head -= take
        }
        let left = pieces.reduce(0) { $0 + $1.count }
        var tail = left % 64
        var tailPieces: [UnsafeRawBufferPointer] = []
        while tail > 0 {
            let last = pieces[pieces.count - 1]
            let take = min(tail, last.count)
            tailPieces.insert(UnsafeRawBufferPointer(rebasing: last[(last.count - take)...]), at: 0)
            pieces[pieces.count - 1] = UnsafeRawBufferPointer(rebasing: last[..<(last.count - take)])
            if pieces[pieces.count - 1].isEmpty { pieces.removeLast() }
            tail -= take
        }
        if left >= 64 {
            let described = pieces.map { tollgate_md5_piece(bytes: $0.baseAddress!.assumingMemoryBound(to: UInt8.self), count: $0.count) }
            described.withUnsafeBufferPointer { described in
                lanes.hash(tollgate_md5_lane(ctx: context, pieces: described.baseAddress, piece: 0, offset: 0, blocks: left / 64))
            }
        }
        for piece in tailPieces { tollgate_md5_update(context, piece.baseAddress, piece.count) }
    }

    /// The digest; the stream must not be updated afterwards.
    public func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 16)
        tollgate_md5_final(context, &digest)
        return digest
    }
}

/// Threads, one per core, that hash the large updates of every `LaneMD5` of the process, up to
/// `TOLLGATE_MD5_LANES` streams per thread and pass (a pass: 16 KiB of each stream). An update
/// joins a busy thread's free lane at its next pass, and wakes an idle thread only when no busy
/// one has a lane free: streams fill a thread's lanes before they spread over cores, since eight
/// streams in one thread cost about as much CPU as two or three hashed apart. A thread with
/// fewer than three streams hashes them one after another with libcrypto. Callers wait
/// (blocked) for their update.
///
/// There are as many threads as the process may keep CPUs busy (`ProcessCPUs`: affinity and
/// cgroup quota). They start with the first update and end with `stop` (the server stops them
/// when its services stop); an update after `stop` is hashed on the caller's thread.
public final class MD5Lanes: @unchecked Sendable {
    /// The process's lanes; nil where the CPU has no vector kernel (then each stream hashes on
    /// its own thread with libcrypto, in parallel).
    public static let shared: MD5Lanes? = {
        let kernel = tollgate_md5_best_kernel()
        return kernel > 0 ? MD5Lanes(kernel: kernel, threads: ProcessCPUs.count()) : nil
    }()

    private final class Job {
        var lane: tollgate_md5_lane
        let done = DispatchSemaphore(value: 0)
        init(_ lane: tollgate_md5_lane) { self.lane = lane }
    }

    private let kernel: Int32
    private let condition = NSCondition()
    /// Guarded by `condition`: updates no thread has taken yet, the lanes each thread uses
    /// (0: idle), and the statistics.
    private var pending: [Job] = []
    private var busy: [Int]
    private var passes = 0
    private var widest = 0
    /// Whether the threads were started, were told to stop, and how many still run.
    private var started = false
    private var stopped = false
    private var running = 0
    /// Blocks per lane per pass: 16 KiB, so that a stream arriving during a pass waits at most
    /// that long to join (a few tens of microseconds); a lone stream's passes are 64 KiB (about
    /// 75 µs), fewer trips through the lock.
    static let passBlocks = 256
    static let lonePassBlocks = 1024
    private static let width = Int(TOLLGATE_MD5_LANES)

    /// Lanes of `kernel` for `threads` threads, started by the first update (internal for tests).
    init(kernel: Int32, threads: Int) {
        self.kernel = kernel
        busy = Array(repeating: 0, count: max(1, threads))
    }

    /// Passes run so far, and the most lanes any of them hashed together.
    public var statistics: (passes: Int, widest: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (passes, widest)
    }

    /// Threads running now.
    public var threadsRunning: Int {
        condition.lock()
        defer { condition.unlock() }
        return running
    }

    /// Ends the threads once the updates given them are hashed, and returns when they have
    /// ended. Updates after this are hashed on their callers' threads.
    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    /// Hashes all of `lane`'s blocks into its state; returns when they are in.
    func hash(_ lane: tollgate_md5_lane) {
        let job = Job(lane)
        condition.lock()
        if stopped {
            condition.unlock()
            while job.lane.blocks > 0 { _ = tollgate_md5_lanes(&job.lane, 1, Self.lonePassBlocks, kernel) }
            return
        }
        if !started {
            started = true
            running = busy.count
            for index in busy.indices {
                let thread = Thread { [unowned self] in
                    // Named from inside: a thread otherwise keeps the name of the one that
                    // started it (a pool's `TP-#n`), which would pass it off as that pool's.
                    Thread.current.name = "tollgate-md5"
                    self.run(index)
                }
                thread.start()
            }
        }
        pending.append(job)
        let free = busy.reduce(0) { $0 + ($1 > 0 ? Self.width - $1 : 0) }
        if pending.count > free { condition.signal() }
        condition.unlock()
        job.done.wait()
    }

    private func run(_ thread: Int) {
        var active: [Job] = []
        var lanes = [tollgate_md5_lane](repeating: tollgate_md5_lane(), count: Self.width)
        while true {
            condition.lock()
            busy[thread] = 0
            while active.isEmpty && pending.isEmpty {
                if stopped {
                    running -= 1
                    condition.broadcast()
                    condition.unlock()
                    return
                }
                condition.wait()
            }
            let joining = min(Self.width - active.count, pending.count)
            active += pending.prefix(joining)
            pending.removeFirst(joining)
            busy[thread] = active.count
            passes += 1
            widest = max(widest, active.count)
            condition.unlock()
            for (index, job) in active.enumerated() { lanes[index] = job.lane }
            _ = tollgate_md5_lanes(&lanes, Int32(active.count), active.count == 1 ? Self.lonePassBlocks : Self.passBlocks, kernel)
            var running: [Job] = []
            for (index, job) in active.enumerated() {
                job.lane = lanes[index]
                if job.lane.blocks == 0 { job.done.signal() } else { running.append(job) }
            }
            active = running
        }
    }
}
