#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Debug naming and event logging, off unless `REACTIVEUV_DEBUG_SIGNALS` is set (RAC's
/// `RAC_DEBUG_SIGNAL_NAMES`): signals are named (`"[+return: 1] -map:"`) and subscriptions log
/// their events. Off, no name string is built.
@usableFromInline
enum DebugSignals {
    /// Read once, at first use.
    @usableFromInline static let isEnabled: Bool = {
        guard let value = getenv("REACTIVEUV_DEBUG_SIGNALS") else { return false }
        let text = String(cString: value)
        return !text.isEmpty && text != "0"
    }()
}
