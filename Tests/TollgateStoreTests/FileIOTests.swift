import Foundation
import NIOCore
import Testing
@testable import TollgateLocalStore

#if canImport(Glibc)
import Glibc
#endif

@Suite struct FileIOTests {
    @Test("every buffer's bytes are lent for the whole call, in order, empty ones included")
    func readableBytesOfManyBuffers() {
        let buffers = (0..<3000).map { index in ByteBuffer(string: index % 7 == 0 ? "" : "\(index),") }
        let joined = Posix.withReadableBytes(of: buffers) { pointers in
            #expect(pointers.count == buffers.count)
            return pointers.flatMap { Array($0) }
        }
        #expect(String(decoding: joined, as: UTF8.self) == buffers.map { String(buffer: $0) }.joined())
        #expect(Posix.withReadableBytes(of: []) { $0.count } == 0)
    }

    @Test("a directory on a file system without locks opens unguarded and says why; a locked one says nothing")
    func directoryLockSaysWhenItCannotLock() throws {
        let box = try Sandbox()
        try FileManager.default.createDirectory(atPath: box.data, withIntermediateDirectories: true)
        // Opening a store blocks, as its opening does.
        let locked = try BlockingWork.allowing { try DirectoryLock(directory: box.data) }
        #expect(locked.unguarded == nil)
        locked.release()
        let unlockable = try BlockingWork.allowing {
            try DirectoryLock(directory: box.data) { _, _ in
                errno = ENOLCK
                return -1
            }
        }
        #expect(unlockable.unguarded?.contains("flock") == true)
        #expect(unlockable.unguarded?.contains("/lock") == true)
        unlockable.release()
    }
}
