// TCP echo server on 127.0.0.1, ephemeral port (printed on the first line).
const net = require("net");
const server = net.createServer((socket) => {
  socket.setNoDelay(true);
  socket.on("data", (data) => socket.write(data));
  socket.on("error", () => {});
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
