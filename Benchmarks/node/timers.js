// libuv's million_timers shape with setTimeout: argv = [count, "spread"|"cyclic"].
// Prints {"start_ns", "run_ns", "group_first_ns", "longest_ms"}: run_ns is from the
// start of scheduling until the last timer fired; group_first_ns until the first
// timer with the longest timeout fired.
const count = parseInt(process.argv[2] || "1000000", 10);
const cyclic = process.argv[3] === "cyclic";
const timeoutOf = (i) => (cyclic ? i % 1000 : 1 + Math.floor(i / 1000));
let longest = 0;
let group = 0;
for (let i = 0; i < count; i++) {
  const timeout = timeoutOf(i);
  if (timeout > longest) { longest = timeout; group = 0; }
  if (timeout === longest) group++;
}
let remaining = count;
let groupFirst = 0n;
const begin = process.hrtime.bigint();
function fired() {
  if (remaining === group) groupFirst = process.hrtime.bigint();
  if (--remaining === 0) {
    const end = process.hrtime.bigint();
    console.log(JSON.stringify({
      start_ns: Number(started - begin), run_ns: Number(end - begin),
      group_first_ns: Number(groupFirst - begin), longest_ms: longest,
    }));
  }
}
for (let i = 0; i < count; i++) setTimeout(fired, timeoutOf(i));
const started = process.hrtime.bigint();
