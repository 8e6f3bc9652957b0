internal import CLibUV
import Synchronization

/// `FileWatch.poll` on a simulated loop: a repeating timer of the loop (virtual time) that `stat`s the path in
/// the in-memory tree each interval (whole milliseconds, at least 1, as libuv's poll counts) and sends a change
/// when what libuv compares differs (size, modification and status-change times, mode, inode, device). As on a
/// real loop, a path that is gone is a change to nil (once), one that comes back a change from nil, and any
/// other error (`EACCES`, `ELOOP`) ends the signal; the loop's shutdown ends it with `shutDown`.
///
/// Thread rule: loop thread only (the simulation's driving thread), except `dispose()` and `disposedFlag`.
final class SimulatedFilePoll: LoopDisposable, @unchecked Sendable {
    // Sendable: every stored var is touched on the loop thread only (dispose() hops there).

    /// What a poll compares: the status a change reports, and the status-change time libuv also compares.
    private struct Seen: Equatable {
        let status: FileStatus
        let statusChangeTime: Duration

        init(_ info: FileInfo) {
            status = info.status
            statusChangeTime = info.statusChangeTime
        }
    }

    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let path: String
    private let files: SimulatedFileSystem
    private var subscriber: Subscriber<FileStatusChange>?
    /// What the last poll found (or the start); nil while the path does not exist.
    private var last: Seen?
    private var timer: (any Disposable)?

    private init(loop: EventLoop, path: String, files: SimulatedFileSystem, subscriber: Subscriber<FileStatusChange>) {
        self.loop = loop
        self.path = path
        self.files = files
        self.subscriber = subscriber
    }

    /// Polls `path` every `interval`, or fails the subscriber as the real start does (`ENOENT`, `EACCES`...).
    static func open(_ path: String, interval: Duration, loop: EventLoop, subscriber: Subscriber<FileStatusChange>) -> (any Disposable)? {
        guard let files = loop.simulatedFiles else {
            subscriber.sendError(loop.simulationRefusal("Watch", what: "FileWatch.poll without a simulated file system"))
            return nil
        }
        let poll = SimulatedFilePoll(loop: loop, path: path, files: files, subscriber: subscriber)
        do throws(UVError) {
            poll.last = Seen(try files.stat(path, followLinks: true, context: "stat \(path)"))
        } catch {
            subscriber.sendError(error)
            return nil
        }
        let step = Duration.milliseconds(Int64(clamping: max(1, interval.millisecondsRoundedUp)))
        let shutDown = EventLoopError.shutDown(loop: loop.name)
        poll.timer = loop.scheduleRepeatingTimer(after: step, every: step, onShutdown: { [weak poll] in poll?.end(shutDown) }) {
            [weak poll] in poll?.tick()
        }
        guard poll.timer != nil else {
            subscriber.sendError(shutDown)
            return nil
        }
        return poll
    }

    private func tick() {
        guard subscriber != nil else { return }
        let current: Seen?
        do throws(UVError) {
            current = Seen(try files.stat(path, followLinks: true, context: "poll \(path)"))
        } catch {
            guard error.code == UV_ENOENT.rawValue || error.code == UV_ENOTDIR.rawValue else { return end(error) }
            current = nil
        }
        guard current != last else { return }
        let previous = last
        last = current
        subscriber?.sendNext(FileStatusChange(previous: previous?.status, current: current?.status))
    }

    private func end(_ error: any Error) {
        let ending = subscriber.take()
        abandon()
        ending?.sendError(error)
    }

    func abandon() {
        disposedFlag.store(true, ordering: .releasing)
        subscriber = nil
        timer.take()?.dispose()
    }
}
