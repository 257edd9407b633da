// Batch operations for the generated-session differential tests (tests/differential/sessiongen.py).
import { buildSessionContext } from "../node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js";
import { withLoadedCopy } from "./session.mjs";

// Like session.contextOfFile, but loads the file once and answers several leaves.
// A leaf is an id, null, undefined (the file's last entry, as after SessionManager.open) or
// {index: i}: the id of the i-th non-header entry after migration (v1 ids are random).
// Returns {invalid: true} or {contexts: [{ok: context} | {error: message}...], count}.
export function contextsOfFile(path, leaves) {
  return withLoadedCopy(path, (entries, byId, last) => {
    const contexts = leaves.map((leaf) => {
      try {
        let target = leaf;
        if (leaf === undefined) target = last;
        else if (leaf !== null && typeof leaf === "object") target = entries[leaf.index]?.id;
        return { ok: buildSessionContext(entries, target, byId) };
      } catch (err) {
        return { error: String(err?.message ?? err) };
      }
    });
    return { contexts, count: entries.length };
  });
}
