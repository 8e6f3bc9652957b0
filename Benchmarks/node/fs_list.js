// Directory listing: argv = [path, batch]. fs.promises.opendir with a buffer of `batch` entries,
// iterated to the end (each entry's name read). Prints {"elapsed_ns", "entries", "failed"}.
const fs = require("fs");
const path = process.argv[2] || "/tmp";
const batch = parseInt(process.argv[3] || "256", 10);
(async () => {
  let entries = 0;
  let nameBytes = 0;
  let failed = 0;
  const begin = process.hrtime.bigint();
  try {
    const dir = await fs.promises.opendir(path, { bufferSize: batch });
    for await (const entry of dir) {
      entries++;
      nameBytes += entry.name.length;
    }
  } catch (e) {
    failed = 1;
  }
  const end = process.hrtime.bigint();
  console.log(JSON.stringify({ elapsed_ns: Number(end - begin), entries, failed, name_bytes: nameBytes }));
})();
