// A TLS front for the HTTP tests of test_client.cpp: accepts TLS on 127.0.0.1:PORT with the
// given certificate and pipes each connection to 127.0.0.1:BACKEND in the clear.
//   node tls_proxy.mjs CERT KEY PORT BACKEND
import fs from "node:fs";
import net from "node:net";
import tls from "node:tls";

const [cert, key, port, backend] = process.argv.slice(2);
const options = { cert: fs.readFileSync(cert), key: fs.readFileSync(key) };
tls.createServer(options, (client) => {
  const upstream = net.connect(Number(backend), "127.0.0.1");
  client.pipe(upstream);
  upstream.pipe(client);
  client.on("error", () => upstream.destroy());
  upstream.on("error", () => client.destroy());
}).listen(Number(port), "127.0.0.1");
