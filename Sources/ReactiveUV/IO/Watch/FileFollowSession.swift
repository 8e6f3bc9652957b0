internal import CLibUV
import Synchronization

/// One subscription of `FileWatch.followEvents`: a state machine on the loop thread, built on the
/// public file and watch signals.
///
/// A *pass* runs on each wake (a directory event or a tick): read the held file to its end, `fstat`
/// it (shorter than the offset: truncated, read again from 0), then `stat` the name and compare
/// device and inode. Passes never overlap: a wake during one marks another to run after it, so no
/// change is missed and a burst of events costs one more pass. Each request runs one at a time (`step`).
///
/// Thread rule: loop thread only, except `init`, `dispose()` and `isDisposed`.
final class FileFollowSession: LoopDisposable, @unchecked Sendable {
    // Everything but `disposedFlag` (atomic) and the immutable `loop` and `settings` is loop thread only
    // (`dispose()` hops there, and every inner subscription is made on the loop, its home).

    /// What was last said about the name, so each notice is sent once per change of state.
    private enum NameState {
        case unknown, following, missing, denied, notAFile
    }

    /// Tests only: runs on the loop thread with the followed path right before a pass looks at the name.
    static let beforeLookingAtNameForTesting = LockedValue<(@Sendable (String) -> Void)?>(nil)

    let loop: EventLoop
    let disposedFlag = Atomic<Bool>(false)
    private let settings: FileFollow.Settings
    /// Nil once the session ended (failed or disposed).
    private var subscriber: Subscriber<FileFollow.Event>?
    /// The file followed, while one is.
    private var held: FollowedFile?
    /// The open in progress.
    private var opening: FollowedFile?
    /// The request in flight (a read, an `fstat`, a `stat`) and its number (a stale answer is dropped).
    private var step: (any Disposable)?
    private var stepNumber = 0
    private var watching: (any Disposable)?
    private var ticking: (any Disposable)?
    /// A pass is running (or parked by the consumer's pause).
    private var busy = false
    /// A wake came during the pass: run one more after it.
    private var wakePending = false
    /// The consumer asked to pause: no read starts until it resumes; `parked` is the read to resume with.
    private var paused = false
    private var parked: (() -> Void)?
    /// The start position applies to the first open only, and only if it succeeds.
    private var isFirstOpen = true
    private var nameState = NameState.unknown

    init(loop: EventLoop, settings: FileFollow.Settings, subscriber: Subscriber<FileFollow.Event>) {
        self.loop = loop
        self.settings = settings
        self.subscriber = subscriber
    }

    /// Registers the flow control, starts the wakes, then opens the name (loop thread); returns self.
    func start() -> (any Disposable)? {
        // Strong captures, as the stream's: the subscription's teardown drops the flow control.
        subscriber?.setFlowControl(pause: { self.paused = true }, resume: { self.resume() })
        // The wakes start first, so that a change made while the file is being opened wakes a pass.
        startWakes()
        guard subscriber != nil else { return self }
        busy = true
        openName()
        return self
    }

    func abandon() { teardown() }

    // MARK: - wakes

    private func startWakes() {
        let settings = self.settings
        // A directory that is missing (or removed later) is watched again every interval; one that cannot be
        // watched leaves the ticks alone to find changes.
        let watch = FileWatch.changes(at: settings.directory, on: loop)
            .retry(upTo: Int.max, delay: settings.interval, while: { FileFollowSession.isMissing($0) })
            .subscribe(next: { [self] _ in wake() }, error: { [self] error in watchFailed(error) })
        let ticks = Signal<Int>.interval(settings.interval, on: loop)
            .subscribe(next: { [self] _ in wake() }, error: { [self] error in fail(error) })
        guard subscriber != nil else {
            watch.dispose()
            ticks.dispose()
            return
        }
        watching = watch
        ticking = ticks
    }

    private func watchFailed(_ error: any Error) {
        watching = nil
        guard let error = error as? UVError,
              [UV_EACCES, UV_EPERM, UV_ENOSPC, UV_EMFILE].contains(where: { $0.rawValue == error.code }) else {
            fail(error)
            return
        }
        send(.notice(.unwatchable(directory: settings.directory, error: error)))
    }

    private func wake() {
        guard subscriber != nil else { return }
        if busy {
            wakePending = true
        } else {
            runPass()
        }
    }

    private func runPass() {
        busy = true
        wakePending = false
        if let held {
            readToEnd(held) { [self] in examine(held) }
        } else {
            openName()
        }
    }

    private func finishPass() {
        busy = false
        if wakePending, subscriber != nil { runPass() }
    }

    private func resume() {
        paused = false
        guard let parked else { return }
        self.parked = nil
        parked()
    }

    // MARK: - the held file

    /// Reads from the held offset until a read comes back short (the end, for a regular file), then `next`.
    private func readToEnd(_ file: FollowedFile, then next: @escaping () -> Void) {
        guard !paused else {
            parked = { [self] in readToEnd(file, then: next) }
            return
        }
        guard let openFile = file.openFile else { return fail(closedError()) }
        let chunkSize = settings.chunkSize
        request(openFile.read(at: file.offset, count: chunkSize)) { [self] chunk in
            if chunk.isEmpty { return next() }
            file.offset += chunk.count
            send(.bytes(chunk))
            guard subscriber != nil else { return }
            if chunk.count < chunkSize { next() } else { readToEnd(file, then: next) }
        }
    }

    /// After a read to the end: truncated? still the file the name names?
    private func examine(_ file: FollowedFile) {
        guard let openFile = file.openFile else { return fail(closedError()) }
        request(openFile.stat()) { [self] now in
            if now.size < UInt64(file.offset) {
                file.offset = 0
                send(.notice(.truncated))
                guard subscriber != nil else { return }
                return readToEnd(file) { [self] in examine(file) }
            }
            lookAtName(for: file, stillLinked: now.linkCount > 0)
        }
    }

    private func lookAtName(for file: FollowedFile, stillLinked: Bool) {
        if let hook = FileFollowSession.beforeLookingAtNameForTesting.withLock({ $0 }) { hook(settings.path) }
        request(Files.stat(settings.path, on: loop), failure: { [self] error in
            if FileFollowSession.isMissing(error) {
                note(.missing, .missing)
                guard subscriber != nil else { return }
                // Renamed away: its writer may still append until it reopens the name. Deleted: let go.
                if stillLinked { return finishPass() }
                readToEnd(file) { [self] in
                    close(file)
                    finishPass()
                }
            } else if let denied = FileFollowSession.deniedError(error) {
                // The directory may not be searched now: the held file is read on meanwhile.
                note(.denied, .denied(denied))
                finishPass()
            } else {
                fail(error)
            }
        }) { [self] named in
            if named.device == file.info?.device && named.inode == file.info?.inode {
                // Never gone, or back under the name.
                note(.following, .following(named))
                return finishPass()
            }
            // Another file has the name: what the old one still holds goes out first.
            readToEnd(file) { [self] in
                close(file)
                openName()
            }
        }
    }

    private func close(_ file: FollowedFile) {
        if held === file { held = nil }
        file.close()
    }

    // MARK: - opening the name

    private func openName() {
        let attempt = FollowedFile()
        opening = attempt
        let subscription = Files.open(settings.path, on: loop).subscribe(next: { [self] openFile in
            guard opening === attempt else { return }
            attempt.openFile = openFile
            request(openFile.stat()) { [self] info in opened(attempt, info) }
        }, error: { [self] error in
            if opening === attempt {
                opening = nil
                openFailed(error)
            } else if held === attempt {
                fail(error)  // the file closed under us: the loop's shutdown
            }
        })
        attempt.subscription = subscription
        if subscriber == nil { subscription.dispose() }
    }

    private func opened(_ file: FollowedFile, _ info: FileInfo) {
        opening = nil
        guard info.type == .regular else {
            file.close()
            if isFirstOpen { return fail(refusal(of: info.type)) }
            note(.notAFile, .notAFile(info.type))
            return finishPass()
        }
        file.info = info
        held = file
        var truncatedSinceOffset = false
        if isFirstOpen {
            switch settings.start {
            case .beginning: file.offset = 0
            case .end: file.offset = Int(info.size)
            case .offset(let offset):
                truncatedSinceOffset = UInt64(offset) > info.size
                file.offset = truncatedSinceOffset ? 0 : offset
            }
        }
        isFirstOpen = false
        nameState = .following
        send(.notice(.following(info)))
        if truncatedSinceOffset { send(.notice(.truncated)) }
        guard subscriber != nil else { return }
        readToEnd(file) { [self] in finishPass() }
    }

    private func openFailed(_ error: any Error) {
        let denied = FileFollowSession.deniedError(error)
        let missing = FileFollowSession.isMissing(error)
        if !missing && denied == nil || isFirstOpen && settings.ifMissing == .fail {
            return fail(error)
        }
        isFirstOpen = false
        if let denied {
            note(.denied, .denied(denied))
        } else {
            note(.missing, .missing)
        }
        finishPass()
    }

    /// The refusal of a first file that cannot be followed: a directory is `EISDIR`, anything else but a
    /// regular file `EINVAL`.
    private func refusal(of type: FileType) -> UVError {
        let context = "FileWatch.follow(\(settings.path))"
        if type == .directory {
            return UVError(code: UV_EISDIR.rawValue, message: "a directory cannot be followed: name a file in it", context: context)
        }
        return UVError(code: UV_EINVAL.rawValue, message: "only a regular file can be followed, this is a \(type)", context: context)
    }

    // MARK: - requests, notices, the end

    /// Runs a one-value signal as the step in flight; `success` gets its value, `failure` its error (default:
    /// the session fails). Nothing is called once the session ended.
    private func request<Value>(_ signal: Signal<Value>, failure: ((any Error) -> Void)? = nil,
                                _ success: @escaping (Value) -> Void) {
        stepNumber &+= 1
        let number = stepNumber
        // The answers ride in the outcome, which the callbacks may capture (it is confined to the loop).
        let outcome = StepOutcome<Value>(success: success, failure: failure ?? { [self] error in fail(error) })
        let subscription = signal.subscribe(next: { outcome.value = $0 }, error: { [self] error in
            outcome.ended = true
            guard stepNumber == number, subscriber != nil else { return }
            step = nil
            outcome.failure(error)
        }, completed: { [self] in
            outcome.ended = true
            guard stepNumber == number, subscriber != nil else { return }
            step = nil
            guard let value = outcome.value else {
                return outcome.failure(UVError(code: UV_EIO.rawValue, message: "the request completed without a value",
                                               context: "FileWatch.follow(\(settings.path))"))
            }
            outcome.success(value)
        })
        // An answer that came at once may have started the next step, or ended the session.
        guard !outcome.ended else { return }
        if subscriber != nil {
            step = subscription
        } else {
            subscription.dispose()
        }
    }

    /// A file read after the session closed it: a broken rule made visible rather than a trap on the loop thread.
    private func closedError() -> UVError {
        UVError(code: UV_EBADF.rawValue, message: "the followed file was already closed", context: "FileWatch.follow(\(settings.path))")
    }

    /// Sends `notice` unless it was the last thing said about the name.
    private func note(_ state: NameState, _ notice: FileFollow.Notice) {
        guard nameState != state else { return }
        nameState = state
        send(.notice(notice))
    }

    private func send(_ event: FileFollow.Event) {
        subscriber?.sendNext(event)
    }

    private func fail(_ error: any Error) {
        guard let subscriber else { return }
        teardown()
        subscriber.sendError(error)
    }

    /// Stops the wakes and the request in flight, and closes the files (loop thread).
    private func teardown() {
        subscriber = nil
        parked = nil
        let disposables = [step, watching, ticking]
        step = nil
        watching = nil
        ticking = nil
        let files = [held, opening]
        held = nil
        opening = nil
        for disposable in disposables { disposable?.dispose() }
        for file in files { file?.close() }
    }

    static func isMissing(_ error: any Error) -> Bool {
        guard let error = error as? UVError else { return false }
        return error.code == UV_ENOENT.rawValue || error.code == UV_ENOTDIR.rawValue
    }

    static func deniedError(_ error: any Error) -> UVError? {
        guard let error = error as? UVError, error.code == UV_EACCES.rawValue || error.code == UV_EPERM.rawValue else { return nil }
        return error
    }
}

/// A file opened by the follower: the `Files.open` subscription that owns it, and where reading stands.
///
/// Thread rule: loop thread only.
final class FollowedFile: @unchecked Sendable {
    // Loop thread only: made, read and closed by its session there.
    var subscription: (any Disposable)?
    var openFile: OpenFile?
    /// What `fstat` said when it was opened (its device and inode name it).
    var info: FileInfo?
    /// Where the next read starts.
    var offset = 0

    /// Closes the file (disposing the subscription that opened it).
    func close() {
        let subscription = self.subscription
        self.subscription = nil
        openFile = nil
        subscription?.dispose()
    }
}

/// A request's answers and what it sent before it ended.
///
/// Thread rule: loop thread only.
private final class StepOutcome<Value>: @unchecked Sendable {
    // Loop thread only: made by the session there, used by the request's callbacks, which run there.
    let success: (Value) -> Void
    let failure: (any Error) -> Void
    var value: Value?
    var ended = false

    init(success: @escaping (Value) -> Void, failure: @escaping (any Error) -> Void) {
        self.success = success
        self.failure = failure
    }
}
