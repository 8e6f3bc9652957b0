// Scaling server: argv = [workers, rounds]. `workers` cluster workers share one port
// (127.0.0.1, ephemeral, printed on the first line once every worker listens). Each 4096-byte
// request is answered with its FNV-1a (32-bit, `rounds` passes) hash, 4 bytes little-endian.
const cluster = require("cluster");
const net = require("net");
const [workers, rounds] = process.argv.slice(2).map(Number);
const REQUEST = 4096;

if (cluster.isPrimary) {
  let listening = 0, port = 0;
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on("listening", (worker, address) => {
    port = address.port;
    if (++listening === workers) console.log(port);
  });
  const stop = () => { for (const id in cluster.workers) cluster.workers[id].kill(); process.exit(0); };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
} else {
  function hash(bytes) {
    let h = 2166136261 | 0;
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < REQUEST; i++) { h ^= bytes[i]; h = Math.imul(h, 16777619); }
    }
    return h >>> 0;
  }
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    const pending = Buffer.alloc(REQUEST);
    let filled = 0;
    socket.on("data", (data) => {
      let replies = [];
      let offset = 0;
      while (offset < data.length) {
        const take = Math.min(REQUEST - filled, data.length - offset);
        data.copy(pending, filled, offset, offset + take);
        filled += take; offset += take;
        if (filled === REQUEST) {
          filled = 0;
          const reply = Buffer.alloc(4);
          reply.writeUInt32LE(hash(pending));
          replies.push(reply);
        }
      }
      if (replies.length > 0) socket.write(replies.length === 1 ? replies[0] : Buffer.concat(replies));
    });
    socket.on("error", () => {});
  });
  server.listen(0, "127.0.0.1");
}
