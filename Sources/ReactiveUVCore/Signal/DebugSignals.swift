#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Debug naming and event logging, off unless `REACTIVEUV_DEBUG_SIGNALS` is set
/// (like RAC's `RAC_DEBUG_SIGNAL_NAMES`).
///
/// When on, constructors and operators name their signals (`"[+return: 1] -map:"`) and every
/// subscription logs its events (see `SignalLogging`). When off, no name string is built.
@usableFromInline
enum DebugSignals {
    /// Read once, at first use.
    @usableFromInline static let isEnabled: Bool = {
        guard let value = getenv("REACTIVEUV_DEBUG_SIGNALS") else { return false }
        let text = String(cString: value)
        return !text.isEmpty && text != "0"
    }()
}
