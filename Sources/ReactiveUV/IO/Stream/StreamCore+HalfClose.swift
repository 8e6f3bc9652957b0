/// The half-close default (Node's `allowHalfOpen: false`): a connection whose peer sent EOF closes
/// itself, gracefully, once the application has had its turn with that EOF.
///
/// The rule (docs/guides/streams.md "Closing and half-close", docs/INTERNALS.md "Half-close"):
/// 1. EOF is read; the `bytes` reader completes after every chunk read before it.
/// 2. The reader has taken the end: for a subscriber's observer, once its completion
///    handler ran (on its home loop); for `bytes.values`, once the iterating task saw the
///    sequence end (or left the loop). `FlowControl.whenEndTaken` reports it on this loop,
///    behind every send the application made before (sends from other threads are queued
///    to this loop in order).
/// 3. One more loop turn passes, so a task running on this loop finishes what it does
///    right after its loop (a last `send`, its own `close()`).
/// 4. Then `close()`: what is queued is flushed, FIN follows, the socket closes. A write
///    made after that fails with `EPIPE`, as after the application's own `close()`.
extension StreamConnection {
    /// Arms the close after the peer's EOF (step 2 on): called on the loop thread right after the reader
    /// completed, with the reader's home and the flow control it had before it completed (`control`:
    /// a reader without a gate loses its subscription's flow control at the completion's teardown,
    /// so it is taken first).
    func closeOnceEndTaken(home: Scheduler, control: FlowControl?) {
        guard let control else {
            closeAfterPeerEnd()
            return
        }
        control.whenEndTaken(home: home) { [self] in closeAfterPeerEnd() }
    }

    /// Step 3 and 4: one more loop turn, then the graceful close (nothing when already closing or closed).
    private func closeAfterPeerEnd() {
        guard isHandleOpen else { return }
        loop.execute { [self] in
            closeWhenFlushed(outcome: nil)
        }
    }
}
