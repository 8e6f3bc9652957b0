// The echo server of the churn and idle-connection scenarios: 127.0.0.1, ephemeral port
// (printed on the first line); echoes each chunk; net's default allowHalfOpen: false ends
// the socket at the client's EOF, as the other contenders close theirs.
const net = require("net");
const server = net.createServer((socket) => {
  socket.on("data", (data) => socket.write(data));
  socket.on("error", () => {});
});
// Started by the benchmark with its standard input a pipe: gone with the benchmark.
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
server.listen({ port: 0, host: "127.0.0.1", backlog: 1024 }, () => console.log(server.address().port));
