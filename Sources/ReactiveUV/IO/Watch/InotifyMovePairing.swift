internal import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Pairs the two halves of a rename in the order events are read from one inotify instance.
///
/// The kernel queues a rename's `IN_MOVED_FROM` and `IN_MOVED_TO` one right after the other with one cookie,
/// so a move-from is held until the next event: its move-to makes a pair; anything else (another event, an
/// overflow) releases it first, alone, so that no event is reported out of order. A move-from that ends a read
/// stays held for the next read (its move-to may be queued just after the read); the hub releases it alone
/// when none comes in time. A move-from alone is an entry moved out of what is watched; a move-to alone, one
/// moved in.
///
/// Thread rule: the hub's loop thread only.
struct InotifyMovePairing {
    /// What is ready to be delivered.
    enum Ready {
        case single(InotifyEvent)
        case move(from: InotifyEvent, to: InotifyEvent)
    }

    /// The move-from waiting for its move-to.
    private(set) var held: InotifyEvent?

    /// Takes the next event read. Returns, to be delivered in this order, a held move-from the event released
    /// alone, and what is ready now (nil when the event is a move-from, held in turn).
    mutating func next(_ event: InotifyEvent) -> (released: InotifyEvent?, ready: Ready?) {
        var released: InotifyEvent?
        if let from = held {
            held = nil
            if event.has(IN_MOVED_TO), event.cookie == from.cookie { return (nil, .move(from: from, to: event)) }
            released = from
        }
        if event.has(IN_MOVED_FROM), event.cookie != 0 {
            held = event
            return (released, nil)
        }
        return (released, .single(event))
    }

    /// Gives up the held move-from, to be delivered alone.
    mutating func release() -> InotifyEvent? {
        defer { held = nil }
        return held
    }
}
