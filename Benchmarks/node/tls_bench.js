// Node's `tls` on the TLS scenarios' workloads: server and client in this process (one thread),
// the same certificate, the client verifying it and the name "localhost". Prints one JSON object.
//   node tls_bench.js bulk CERT KEY TOTAL              -> {"rate": MB/s}
//   node tls_bench.js handshakes CERT KEY COUNT INFLIGHT -> {"rate": handshakes/s}
const tls = require("tls");
const fs = require("fs");
const [mode, certPath, keyPath, a, b] = process.argv.slice(2);
const cert = fs.readFileSync(certPath);
const key = fs.readFileSync(keyPath);
const clientOptions = (port) => ({ host: "127.0.0.1", port, servername: "localhost", ca: cert });

function bulk(total) {
  const payload = Buffer.alloc(65536, 0x70);
  let received = 0, begin = 0n, done = false;
  const server = tls.createServer({ cert, key }, (socket) => {
    socket.setNoDelay(true);
    socket.on("data", (chunk) => {
      received += chunk.length;
      if (received >= total && !done) {
        done = true;
        const elapsed = Number(process.hrtime.bigint() - begin) / 1e9;
        console.log(JSON.stringify({ rate: total / 1e6 / elapsed }));
        process.exit(0);
      }
    });
    socket.on("error", () => {});
  });
  server.listen(0, "127.0.0.1", () => {
    const socket = tls.connect(clientOptions(server.address().port), () => {
      socket.setNoDelay(true);
      begin = process.hrtime.bigint();
      let queued = 0;
      const send = () => {
        if (queued >= total) return;
        queued += payload.length;
        socket.write(payload, send);
      };
      for (let i = 0; i < 8; i++) send();
    });
    socket.on("error", (error) => { console.error(error.message); process.exit(1); });
  });
}

function handshakes(count, inFlight) {
  let opened = 0, serverDone = 0, started = 0n;
  const server = tls.createServer({ cert, key }, (socket) => {
    socket.setNoDelay(true);
    socket.on("data", () => {});
    socket.on("end", () => socket.end());
    socket.on("error", () => {});
    serverDone += 1;
    if (serverDone === count) {
      const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
      console.log(JSON.stringify({ rate: count / elapsed }));
      process.exit(0);
    }
  });
  const next = () => {
    if (opened >= count) return;
    opened += 1;
    const socket = tls.connect(clientOptions(server.address().port), () => {
      socket.end();
      next();
    });
    socket.setNoDelay(true);
    socket.on("error", (error) => { console.error(error.message); process.exit(1); });
  };
  server.listen(0, "127.0.0.1", 1024, () => {
    started = process.hrtime.bigint();
    for (let i = 0; i < inFlight; i++) next();
  });
}

if (mode === "bulk") bulk(Number(a));
else if (mode === "handshakes") handshakes(Number(a), Number(b));
else { console.error("mode: bulk | handshakes"); process.exit(2); }
