// libuv's million_timers shape with setTimeout: argv = [count, "spread"|"cyclic"].
// Prints {"start_ns", "run_ns", "longest_ms"}: run_ns is from the start of
// scheduling until the last timer fired.
const count = parseInt(process.argv[2] || "1000000", 10);
const cyclic = process.argv[3] === "cyclic";
let remaining = count;
let longest = 0;
const begin = process.hrtime.bigint();
function fired() {
  if (--remaining === 0) {
    const end = process.hrtime.bigint();
    console.log(JSON.stringify({ start_ns: Number(started - begin), run_ns: Number(end - begin), longest_ms: longest }));
  }
}
for (let i = 0; i < count; i++) {
  const timeout = cyclic ? i % 1000 : 1 + Math.floor(i / 1000);
  if (timeout > longest) longest = timeout;
  setTimeout(fired, timeout);
}
const started = process.hrtime.bigint();
