// A client built on the official TypeScript SDK (v1: @modelcontextprotocol/sdk; v2:
// @modelcontextprotocol/client), driven by tests/interop/test_typescript_sdk.py. It reads a JSON
// plan from argv[2], does what the plan says against one MCP endpoint and prints what it saw as
// one JSON object. The packages are resolved from $INTEROP_DIR (scripts/install-node-parts.sh).
//
// Plan: {sdk: "v1"|"v2", url, key, transport: "http"|"sse", negotiation: "legacy"|"auto" (v2),
//        calls: [{name, arguments, progress?}], reads: [uri], prompts: [{name, arguments}]}
// Output: {protocolVersion, tools, toolPages, resources, templates, prompts, calls, reads, gets}
import { createRequire } from "node:module";
import path from "node:path";

const plan = JSON.parse(process.argv[2]);
const require = createRequire(path.join(process.env.INTEROP_DIR, "package.json"));

function v1Client() {
  const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const { SSEClientTransport } = require("@modelcontextprotocol/sdk/client/sse.js");
  const authorization = { Authorization: `Bearer ${plan.key}` };
  const url = new URL(plan.url);
  // The key on every request, the event stream's GET included.
  const withKey = (target, init) => fetch(target, {
    ...init, headers: { ...Object.fromEntries(new Headers(init?.headers)), ...authorization },
  });
  const transport = plan.transport === "sse"
    ? new SSEClientTransport(url, { fetch: withKey })
    : new StreamableHTTPClientTransport(url, { requestInit: { headers: authorization } });
  // v1 hands the negotiated revision to the transport, which keeps it to itself: note it on the way.
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (version) => {
    transport.negotiated = version;
    setVersion?.(version);
  };
  const client = new Client({ name: "interop-v1", version: "1.0.0" }, { capabilities: {} });
  return { client, transport };
}

function v2Client() {
  const { Client, StreamableHTTPClientTransport, SSEClientTransport } = require("@modelcontextprotocol/client");
  const authProvider = { token: async () => plan.key };
  const url = new URL(plan.url);
  const transport = plan.transport === "sse"
    ? new SSEClientTransport(url, { authProvider })
    : new StreamableHTTPClientTransport(url, { authProvider });
  const client = new Client(
    { name: "interop-v2", version: "2.0.0" },
    { capabilities: {}, versionNegotiation: { mode: plan.negotiation ?? "legacy" } },
  );
  return { client, transport };
}

async function all(list, field) {
  const entries = [];
  let cursor;
  let pages = 0;
  do {
    const page = await list(cursor === undefined ? {} : { cursor });
    pages += 1;
    entries.push(...page[field]);
    cursor = page.nextCursor;
  } while (cursor);
  return { entries, pages };
}

async function main() {
  const { client, transport } = plan.sdk === "v2" ? v2Client() : v1Client();
  await client.connect(transport);
  const seen = {};
  const version = client.getNegotiatedProtocolVersion?.() ?? transport.negotiated;
  seen.protocolVersion = version ?? null;
  const capabilities = client.getServerCapabilities() ?? {};
  const tools = await all((params) => client.listTools(params), "tools");
  seen.tools = tools.entries;
  seen.toolPages = tools.pages;
  if (capabilities.resources) {
    seen.resources = (await all((params) => client.listResources(params), "resources")).entries;
    seen.templates = (await all((params) => client.listResourceTemplates(params), "resourceTemplates")).entries;
  }
  if (capabilities.prompts) {
    seen.prompts = (await all((params) => client.listPrompts(params), "prompts")).entries;
  }
  seen.calls = [];
  for (const call of plan.calls ?? []) {
    const progress = [];
    const options = call.progress ? { onprogress: (p) => progress.push(p) } : undefined;
    const params = { name: call.name, arguments: call.arguments ?? {} };
    // v1 takes a result schema before the options; v2 only the options.
    const result = plan.sdk === "v2" ? await client.callTool(params, options) : await client.callTool(params, undefined, options);
    seen.calls.push({ name: call.name, result, progress });
  }
  seen.reads = [];
  for (const uri of plan.reads ?? []) {
    seen.reads.push({ uri, result: await client.readResource({ uri }) });
  }
  seen.gets = [];
  for (const prompt of plan.prompts ?? []) {
    seen.gets.push({ name: prompt.name, result: await client.getPrompt(prompt) });
  }
  await client.close();
  process.stdout.write(JSON.stringify(seen));
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error?.stack ?? error}\n`);
    process.exit(1);
  },
);
