// The echo server of the churn and idle-connection scenarios: 127.0.0.1, ephemeral port
// (printed on the first line); echoes each chunk; net's default allowHalfOpen: false ends
// the socket at the client's EOF, as the other contenders close theirs.
const net = require("net");
const server = net.createServer((socket) => {
  socket.on("data", (data) => socket.write(data));
  socket.on("error", () => {});
});
server.listen({ port: 0, host: "127.0.0.1", backlog: 1024 }, () => console.log(server.address().port));
