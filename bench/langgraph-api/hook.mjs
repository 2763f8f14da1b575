// bench/langgraphjs/lib (the benchmark supervisor graph) imports "@langchain/..."; from a process
// of this folder those imports resolve here, so the server and the graph share one
// @langchain/langgraph and bench/langgraphjs need not be installed. Import this module first,
// then import bench/langgraphjs/lib dynamically.
import { register } from "node:module";

const here = JSON.stringify(import.meta.url);
register(
  "data:text/javascript," +
    encodeURIComponent(`export async function resolve(spec, ctx, next) {
  const fromLib = ctx.parentURL && ctx.parentURL.includes("/bench/langgraphjs/");
  return next(spec, fromLib && spec.startsWith("@langchain/") ? { ...ctx, parentURL: ${here} } : ctx);
}`),
);
