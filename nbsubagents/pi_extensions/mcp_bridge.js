// Loaded by nbsubagents into a pi child whose run has tool servers (the Python session, ...): each server is an MCP
// server over stdio (nbsubagents/_child/tool_servers.py), and each of its tools becomes a pi tool of the same name.
//
// The servers are the JSON in the environment variable NBSUBAGENTS_TOOL_SERVERS, decided by the kernel (the run's
// meta.json "env"): a list of {name, argv, env, tools}. When pi loads this extension (it awaits the factory), each
// server is started with pi's environment plus its own, in pi's working folder, its stderr pi's; it is asked for
// its tools (initialize, tools/list), and each is registered with its description and JSON Schema. A call is a
// tools/call; an error result (isError) is thrown, so pi marks the tool result as failed. An aborted call
// interrupts the server's work (SIGINT). A server ends with pi: its stdin closes when pi exits, and pi's
// session_shutdown ends it at once.
//
// No build step, no import beyond Node's own: pi 0.73 and 1.x load it as it is.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

const START_TIMEOUT_MS = 60_000; // a server's initialize and tools/list (a loaded machine starts Python slowly)
const PROTOCOL = "2025-06-18";
const DETAILS = "nbsubagents/details"; // a result's details for the run's record (tool_servers.DETAILS)

function readServers() {
  try {
    const servers = JSON.parse(process.env.NBSUBAGENTS_TOOL_SERVERS || "[]");
    return Array.isArray(servers) ? servers.filter((s) => s && typeof s.name === "string" && Array.isArray(s.argv)) : [];
  } catch {
    throw new Error(`NBSUBAGENTS_TOOL_SERVERS is not a list of tool servers: ${process.env.NBSUBAGENTS_TOOL_SERVERS}`);
  }
}

class Server {
  constructor(spec) {
    this.name = spec.name;
    this.nextId = 1;
    this.pending = new Map();
    this.exited = null;
    this.child = spawn(spec.argv[0], spec.argv.slice(1), {
      cwd: process.cwd(),
      env: { ...process.env, ...(spec.env || {}) },
      stdio: ["pipe", "pipe", "inherit"],
    });
    this.child.on("error", (error) => this.fail(`could not start: ${error.message}`));
    this.child.on("exit", (code, signal) => this.fail(`ended (${signal || `exit code ${code}`})`));
    this.child.stdin.on("error", () => {}); // a server that ended: its pending calls are failed by "exit"
    createInterface({ input: this.child.stdout }).on("line", (line) => this.receive(line));
  }

  fail(why) {
    this.exited = `tool server ${this.name} ${why}`;
    for (const { reject } of this.pending.values()) reject(new Error(this.exited));
    this.pending.clear();
  }

  receive(line) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      return; // not the protocol's: ignored
    }
    const waiting = this.pending.get(message.id);
    if (!waiting) return;
    this.pending.delete(message.id);
    if (message.error) waiting.reject(new Error(`${this.name}: ${message.error.message || "error"}`));
    else waiting.resolve(message.result);
  }

  request(method, params, timeoutMs) {
    if (this.exited) return Promise.reject(new Error(this.exited));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      let timer = null;
      if (timeoutMs) {
        timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new Error(`tool server ${this.name} did not answer ${method} in ${timeoutMs / 1000} s`));
        }, timeoutMs);
      }
      const done = (fn) => (value) => {
        if (timer) clearTimeout(timer);
        fn(value);
      };
      this.pending.set(id, { resolve: done(resolve), reject: done(reject) });
      this.child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  }

  notify(method, params) {
    if (!this.exited) this.child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method, params }) + "\n");
  }

  interrupt() {
    if (!this.exited) this.child.kill("SIGINT");
  }

  close() {
    if (this.exited) return;
    this.child.stdin.end();
    this.child.kill("SIGTERM");
  }
}

function textOf(result) {
  const parts = Array.isArray(result?.content) ? result.content : [];
  return parts.map((part) => (part?.type === "text" ? part.text : `[${part?.type} content]`)).join("\n");
}

export default async function (pi) {
  const servers = [];
  const closeAll = () => servers.forEach((server) => server.close());
  process.on("exit", closeAll);
  pi.on("session_shutdown", closeAll);
  for (const spec of readServers()) {
    const server = new Server(spec);
    servers.push(server);
    await server.request("initialize", {
      protocolVersion: PROTOCOL,
      capabilities: {},
      clientInfo: { name: "nbsubagents-pi-bridge", version: "1" },
    }, START_TIMEOUT_MS);
    server.notify("notifications/initialized", {});
    const { tools = [] } = await server.request("tools/list", {}, START_TIMEOUT_MS);
    for (const tool of tools) {
      pi.registerTool({
        name: tool.name,
        label: tool.title || tool.name,
        description: tool.description || tool.name,
        promptSnippet: tool.description || tool.name,
        parameters: tool.inputSchema || { type: "object", properties: {} },
        async execute(toolCallId, params, signal) {
          const onAbort = () => server.interrupt();
          signal?.addEventListener("abort", onAbort, { once: true });
          try {
            const meta = { "nbsubagents/toolCallId": toolCallId }; // the call's id (tool_servers.CALL_IDS)
            const result = await server.request("tools/call", { name: tool.name, arguments: params || {}, _meta: meta });
            const text = textOf(result);
            if (result?.isError) throw new Error(text || `${tool.name} failed`);
            return { content: [{ type: "text", text }], details: result?._meta?.[DETAILS] || {} };
          } finally {
            signal?.removeEventListener("abort", onAbort);
          }
        },
      });
    }
  }
}
