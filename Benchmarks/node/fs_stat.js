// stat throughput: argv = [count, path, inflight]. `inflight` chains of fs.promises.stat on one
// path, each starting its next stat when one resolves, until `count` were made.
// Prints {"elapsed_ns", "failed"}.
const fs = require("fs");
const count = parseInt(process.argv[2] || "100000", 10);
const path = process.argv[3] || "/tmp";
const inflight = parseInt(process.argv[4] || "32", 10);
let started = 0;
let failed = 0;
async function chain() {
  while (started < count) {
    started++;
    try { await fs.promises.stat(path); } catch (e) { failed = 1; return; }
  }
}
(async () => {
  const begin = process.hrtime.bigint();
  const chains = [];
  for (let i = 0; i < inflight; i++) chains.push(chain());
  await Promise.all(chains);
  const end = process.hrtime.bigint();
  console.log(JSON.stringify({ elapsed_ns: Number(end - begin), failed }));
})();
