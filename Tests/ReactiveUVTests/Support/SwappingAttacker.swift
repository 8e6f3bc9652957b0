import Foundation
import Synchronization
import XCTest

/// A thread that swaps a directory and a symbolic link by name, atomically (`renameat2` with `RENAME_EXCHANGE`),
/// as fast as it can, until stopped: the name is the directory half of the time and the link the other half.
final class SwappingAttacker: Sendable {
    private typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    private let stopping = Atomic<Bool>(false)
    private let swaps = Atomic<Int>(0)
    private let running = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// Starts the thread exchanging the names `directory` and `link`, until stopped or after `limit` exchanges;
    /// returns once it runs. Skips the test where the C library has no `renameat2` or the file system cannot
    /// exchange names.
    init(directory: String, link: String, limit: Int = .max) throws {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") else {
            throw XCTSkip("this C library has no renameat2")
        }
        let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
        let exchange: UInt32 = 2  // RENAME_EXCHANGE
        guard renameat2(AT_FDCWD, directory, AT_FDCWD, link, exchange) == 0,
              renameat2(AT_FDCWD, directory, AT_FDCWD, link, exchange) == 0 else {
            throw XCTSkip("this file system cannot exchange names (errno \(errno))")
        }
        let thread = Thread { [self] in
            running.signal()
            var made = 0
            while made < limit && !stopping.load(ordering: .relaxed) {
                // Failures are expected: the code under test takes the names away under the attacker.
                if renameat2(AT_FDCWD, directory, AT_FDCWD, link, exchange) == 0 { made += 1 }
            }
            swaps.store(made, ordering: .relaxed)
            finished.signal()
        }
        thread.start()
        running.wait()
    }

    /// Stops the thread, waits for it, and returns how many exchanges it made.
    func stop() -> Int {
        stopping.store(true, ordering: .relaxed)
        finished.wait()
        return swaps.load(ordering: .relaxed)
    }
}
