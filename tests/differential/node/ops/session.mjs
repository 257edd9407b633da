// Session-layer operations composed the way the reference composes them.
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildSessionContext,
  loadEntriesFromFile,
  migrateSessionEntries,
} from "../node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js";

// Load a file the way SessionManager.open does, on a copy (loading repairs the final newline and
// migration rewrites), and hand its entries, id index and last id to `use`.
// Returns {invalid: true} when the reference refuses the file.
export function withLoadedCopy(path, use) {
  const dir = mkdtempSync(join(tmpdir(), "pi-diff-"));
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
    return use(entries, byId, last);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The context for the given leaf ("__undefined__" = the file's last entry, as after open).
export function contextOfFile(path, leafId) {
  return withLoadedCopy(path, (entries, byId, last) =>
    buildSessionContext(entries, leafId === undefined ? last : leafId, byId));
}
