// JSON text exactly as the reference writes it, for byte-level comparisons.
import { buildSessionContext } from "../node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js";
import { withLoadedCopy } from "./session.mjs";

// JSON.stringify(JSON.parse(line)) for each line (null where JSON.parse throws).
export function roundTrip(lines) {
  return lines.map((line) => {
    try {
      return JSON.stringify(JSON.parse(line));
    } catch {
      return null;
    }
  });
}

// JSON.stringify of the context of a file's last entry, as `picontext context FILE --json` prints it.
export function contextText(path) {
  return withLoadedCopy(path, (entries, byId, last) => JSON.stringify(buildSessionContext(entries, last, byId)));
}

// Append a user message to an existing session file the way Pi does (SessionManager.open + appendMessage).
export async function piAppendUserMessage(path, text) {
  const { SessionManager } = await import(
    "../node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js");
  const sm = SessionManager.open(path);
  return sm.appendMessage({ role: "user", content: text, timestamp: Date.now() });
}
