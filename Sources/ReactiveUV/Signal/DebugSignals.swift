#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Debug naming and event logging, off unless `REACTIVEUV_DEBUG_SIGNALS` is set
/// (like RAC's `RAC_DEBUG_SIGNAL_NAMES`).
///
/// When on, signals made by constructors and operators get names such as
/// `"[+return: 1] -map:"`, and every event reaching a subscriber is written to
/// standard error with its signal's name. When off, no name string is built.
@usableFromInline
enum DebugSignals {
    /// Read once, at first use.
    @usableFromInline static let isEnabled: Bool = {
        guard let value = getenv("REACTIVEUV_DEBUG_SIGNALS") else { return false }
        let text = String(cString: value)
        return !text.isEmpty && text != "0"
    }()

    @usableFromInline
    static func log<Value>(signal name: String, event: Event<Value>) {
        reportMisuse("[\(name.isEmpty ? "signal" : name)] \(event)")
    }
}
