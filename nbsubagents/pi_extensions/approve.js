// Loaded by nbsubagents into a pi child whose run needs approvals (a preset's or a call's `approval:`): before a
// tool named by the policy runs, the person in the notebook is asked to allow it; a call not allowed is blocked, and
// the model sees why.
//
// The policy is the JSON in the environment variable NBSUBAGENTS_APPROVAL (meta.json's "approval"):
//   tools      pi tool names whose calls need approval ("*": every tool but `ask`);
//   allow      fnmatch patterns (`*`, `?`, `[abc]`, `[!abc]`) of bash commands that need none: every command of a
//              line chained with `;`, `&&`, `||`, `|`, `&` or newlines must match one, and a command that
//              substitutes (`$(...)`, backquotes, `<(...)`) or redirects output (`>`) always asks;
//   inside     folders, relative to the run's cwd, whose edits and writes need none (symbolic links resolved);
//   otherwise  "deny" or "allow": what pi decides when it has no dialogs (print mode). When nobody answers in time
//              the supervisor answers for the policy; the extension only sees allowed or not.
// A missing or unreadable policy asks for every call: an approval that is not understood fails closed.
//
// The question is `ctx.ui.confirm("Allow <tool>?", <the call on one line>)`: in RPC mode pi writes it as an
// `extension_ui_request` that the supervisor shows to the notebook. The line is never cut: what is allowed is the
// whole call, so the person sees all of it (a command's tail may be the part that matters).
import { realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";

const DENIED = "Denied by the person in the notebook (or, when nobody answered in time, by the run's approval policy)";
const DENIED_BY_POLICY = "Denied by the run's approval policy (there was no one to ask)";

function readPolicy() {
  try {
    const policy = JSON.parse(process.env.NBSUBAGENTS_APPROVAL || "");
    if (policy && Array.isArray(policy.tools)) return { error: null, policy };
  } catch {
    // fall through: fail closed
  }
  return {
    error: `NBSUBAGENTS_APPROVAL is not an approval policy (${JSON.stringify(process.env.NBSUBAGENTS_APPROVAL)}): ` +
      "every tool call asks",
    policy: { tools: ["*"], allow: [], inside: [], otherwise: "deny" },
  };
}

// fnmatch: the whole text against `*`, `?` and `[...]` (`[!...]` negated), as Python's fnmatch.fnmatchcase.
function fnmatch(text, pattern) {
  let source = "";
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i];
    if (char === "*") source += "[\\s\\S]*";
    else if (char === "?") source += "[\\s\\S]";
    else if (char === "[" && pattern.indexOf("]", i + 2) !== -1) {
      const end = pattern.indexOf("]", i + 2);
      let set = pattern.slice(i + 1, end).replace(/\\/g, "\\\\");
      if (set.startsWith("!")) set = "^" + set.slice(1);
      source += `[${set}]`;
      i = end;
    } else source += char.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${source}$`).test(text);
}

function commandAllowed(command, patterns) {
  if (!patterns.length || /\$\(|`|<\(|>/.test(command)) return false;
  const parts = command.split(/&&|\|\||[;&|\n]/).map((part) => part.trim()).filter(Boolean);
  return parts.length > 0 && parts.every((part) => patterns.some((pattern) => fnmatch(part, pattern)));
}

// The real path of `path`, resolving symbolic links of the part that exists (a new file's folder).
function real(path) {
  try {
    return realpathSync(path);
  } catch {
    const parent = dirname(path);
    return parent === path ? path : join(real(parent), basename(path));
  }
}

function pathInside(cwd, path, folders) {
  if (typeof path !== "string" || !folders.length) return false;
  const target = real(resolve(cwd, path.replace(/^@/, "")));
  return folders.some((folder) => {
    const rel = relative(real(resolve(cwd, folder)), target);
    return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
  });
}

function needsApproval(policy, event, cwd) {
  const tools = policy.tools || [];
  if (event.toolName === "ask" || !(tools.includes("*") || tools.includes(event.toolName))) return false;
  const input = event.input || {};
  if (event.toolName === "bash") return !commandAllowed(String(input.command || ""), policy.allow || []);
  if (event.toolName === "edit" || event.toolName === "write") return !pathInside(cwd, input.path, policy.inside || []);
  return true;
}

function summary(event) {
  const input = event.input || {};
  const text = event.toolName === "bash" ? String(input.command)
    : typeof input.path === "string" ? input.path
    : JSON.stringify(input);
  return text.replace(/\s+/g, " ").trim();
}

export default function (pi) {
  const { error, policy } = readPolicy();
  pi.on("session_start", (_event, ctx) => {
    if (error) ctx.ui.notify(error, "error");
  });
  pi.on("tool_call", async (event, ctx) => {
    if (!needsApproval(policy, event, ctx.cwd || process.cwd())) return undefined;
    if (!ctx.hasUI) return policy.otherwise === "allow" ? undefined : { block: true, reason: DENIED_BY_POLICY };
    const allowed = await ctx.ui.confirm(`Allow ${event.toolName}?`, summary(event), { signal: ctx.signal });
    return allowed ? undefined : { block: true, reason: DENIED };
  });
}
