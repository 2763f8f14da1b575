// An MCP server on the official TypeScript SDK (pinned in package.json) for what
// server-everything does not do: it lists its five tools two per page (tools/list with
// nextCursor), and its tool "ping-client" sends the client a ping request and waits for the
// answer. Run by test_client.cpp over stdio: node paginated_server.mjs
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, EmptyResultSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const names = ["alpha", "beta", "gamma", "delta", "ping-client"];
const pageSize = 2;
const server = new Server({ name: "paginated", version: "1.0.0" }, { capabilities: { tools: {} } });

server.setRequestHandler(ListToolsRequestSchema, async (request) => {
  const start = Number(request.params?.cursor ?? 0);
  const page = names.slice(start, start + pageSize).map((name) => ({
    name,
    description: `tool ${name}`,
    inputSchema: { type: "object", properties: {} },
  }));
  const next = start + pageSize;
  return next < names.length ? { tools: page, nextCursor: String(next) } : { tools: page };
});

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const name = request.params.name;
  if (name === "ping-client") {
    await server.request({ method: "ping" }, EmptyResultSchema);
    return { content: [{ type: "text", text: "the client answered ping" }] };
  }
  if (!names.includes(name)) return { content: [{ type: "text", text: `no tool ${name}` }], isError: true };
  return { content: [{ type: "text", text: `called ${name}` }] };
});

await server.connect(new StdioServerTransport());
