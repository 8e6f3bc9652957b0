// TCP echo ping-pong client: argv = [port, size, warmup_ms, measure_ms].
// Prints {"round_trips_per_s", "median_us"}.
const net = require("net");
const [port, size, warmup, measure] = process.argv.slice(2).map(Number);
const message = Buffer.alloc(size, "x");
const start = process.hrtime.bigint();
const from = start + BigInt(warmup) * 1000000n, until = from + BigInt(measure) * 1000000n;
let received = 0, sentAt = 0n, roundTrips = 0;
const latencies = [];
const socket = net.connect(port, "127.0.0.1", () => { socket.setNoDelay(true); send(); });
function send() { sentAt = process.hrtime.bigint(); socket.write(message); }
socket.on("data", (data) => {
  received += data.length;
  if (received < size) return;
  received = 0;
  const now = process.hrtime.bigint();
  if (now >= from) { roundTrips++; latencies.push(Number(now - sentAt)); }
  if (now >= until) {
    latencies.sort((a, b) => a - b);
    const seconds = Number(now - from) / 1e9;
    console.log(JSON.stringify({ round_trips_per_s: roundTrips / seconds, median_us: latencies[Math.floor(latencies.length / 2)] / 1000 }));
    socket.destroy();
    return;
  }
  send();
});
