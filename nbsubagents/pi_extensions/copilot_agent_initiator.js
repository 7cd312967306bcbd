// Loaded by nbsubagents into a pi child whose model is github-copilot/*: every request of a sub-agent is
// agent-initiated, so it carries "X-Initiator: agent" (pi itself says "user" for a request that follows a
// user message, such as a child's first one).
//
// pi merges a provider's configured request headers after its own dynamic ones, so registering a header
// for the provider wins. In pi 0.73 registering replaces the provider's request settings from
// models.json (apiKey, authHeader, headers), so they are carried over unchanged from there.
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

function configuredProvider() {
  let dir = process.env.PI_CODING_AGENT_DIR || join(homedir(), ".pi", "agent");
  if (dir === "~" || dir.startsWith("~/")) dir = join(homedir(), dir.slice(1));
  try {
    const providers = JSON.parse(readFileSync(join(dir, "models.json"), "utf8")).providers;
    return (providers && providers["github-copilot"]) || {};
  } catch {
    return {};
  }
}

export default function (pi) {
  const own = configuredProvider();
  const config = { headers: { ...(own.headers || {}), "X-Initiator": "agent" } };
  if (own.apiKey !== undefined) config.apiKey = own.apiKey;
  if (own.authHeader !== undefined) config.authHeader = own.authHeader;
  pi.registerProvider("github-copilot", config);
}
