// File read: argv = [path, chunk]. Streams the file with fs.createReadStream
// (highWaterMark = chunk) to its end. Prints {"elapsed_ns", "bytes", "failed"}.
const fs = require("fs");
const path = process.argv[2];
const chunk = parseInt(process.argv[3] || "65536", 10);
let bytes = 0;
const begin = process.hrtime.bigint();
const stream = fs.createReadStream(path, { highWaterMark: chunk });
stream.on("data", (data) => { bytes += data.length; });
stream.on("error", () => {
  console.log(JSON.stringify({ elapsed_ns: 0, bytes, failed: 1 }));
});
stream.on("close", () => {
  const end = process.hrtime.bigint();
  console.log(JSON.stringify({ elapsed_ns: Number(end - begin), bytes, failed: 0 }));
});
