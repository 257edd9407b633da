// Batch operations for the generated-session differential tests (tests/differential/sessiongen.py).
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildSessionContext,
  loadEntriesFromFile,
  migrateSessionEntries,
} from "../node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js";

// Like session.contextOfFile, but loads the file once and answers several leaves.
// A leaf is an id, null, undefined (the file's last entry, as after SessionManager.open) or
// {index: i}: the id of the i-th non-header entry after migration (v1 ids are random).
// Returns {invalid: true} or {contexts: [{ok: context} | {error: message}...], count}.
export function contextsOfFile(path, leaves) {
  const dir = mkdtempSync(join(tmpdir(), "pi-gen-"));
  try {
    const copy = join(dir, "s.jsonl");
    copyFileSync(path, copy);
    const fileEntries = loadEntriesFromFile(copy);
    if (fileEntries.length === 0) return { invalid: true };
    migrateSessionEntries(fileEntries);
    const entries = fileEntries.filter((e) => e.type !== "session");
    const byId = new Map();
    let last = null;
    for (const e of entries) { byId.set(e.id, e); last = e.id; }
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
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
