// The LangGraph JS server (@langchain/langgraph-api, the server behind `langgraph dev`: in-memory,
// its threads and runs flushed to .langgraph_api/ in this folder) serving the benchmark supervisor graph.
//
//   load.mjs --HTTP--> startServer (Hono on @hono/node-server) --> graph.mjs (22 nodes)
//                           |--> nWorkers queue workers, in-memory checkpointer
//
//   node server.mjs [--port N] [--workers 10]
// Prints "listening <port>" on stdout once it accepts; SIGINT/SIGTERM stops it.
import "./hook.mjs";
import { startServer } from "@langchain/langgraph-api/server";
import { fileURLToPath } from "node:url";

const args = { port: "0", workers: "10" };
for (let i = 2; i < process.argv.length; i += 2) {
  const k = process.argv[i].replace(/^--/, "");
  if (!(k in args) || i + 1 >= process.argv.length) {
    console.error(`server.mjs: bad argument ${process.argv[i]} (--port N [--workers N])`);
    process.exit(2);
  }
  args[k] = process.argv[i + 1];
}
const { host, cleanup } = await startServer({
  port: Number(args.port),
  // `langgraph dev --n-jobs-per-worker` defaults to 10.
  nWorkers: Number(args.workers),
  host: "127.0.0.1",
  cwd: fileURLToPath(new URL(".", import.meta.url)),
  graphs: { supervisor: "./graph.mjs:graph" },
});
console.log(`listening ${host.split(":").pop()}`);
const stop = async () => {
  await cleanup();
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
