// Spawn rate: argv = [count, file]. Starts `file` with stdio ignored, waits for its
// exit, then starts the next, `count` times. Prints {"elapsed_ns", "failed"}.
const { spawn } = require("child_process");
const count = parseInt(process.argv[2] || "2000", 10);
const file = process.argv[3] || "/bin/true";
let remaining = count;
let failed = 0;
const begin = process.hrtime.bigint();
function next() {
  const child = spawn(file, [], { stdio: "ignore" });
  child.on("error", () => { failed = 1; done(); });
  child.on("exit", (code, signal) => {
    if (code !== 0 || signal !== null) failed = 1;
    if (--remaining > 0) next(); else done();
  });
}
function done() {
  const end = process.hrtime.bigint();
  console.log(JSON.stringify({ elapsed_ns: Number(end - begin), failed }));
}
next();
