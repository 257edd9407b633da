// Session-layer operations composed the way the reference composes them.
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildSessionContext,
  loadEntriesFromFile,
  migrateSessionEntries,
} from "../node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js";

// Load a file the way SessionManager.open does (on a copy, since loading repairs and migration
// rewrites), then build the context for the given leaf ("__undefined__" = the file's last entry).
export function contextOfFile(path, leafId) {
  const dir = mkdtempSync(join(tmpdir(), "pi-diff-"));
  try {
    const copy = join(dir, "s.jsonl");
    copyFileSync(path, copy);
    const fileEntries = loadEntriesFromFile(copy);
    if (fileEntries.length === 0) return { invalid: true };
    migrateSessionEntries(fileEntries);
    const entries = fileEntries.filter((e) => e.type !== "session");
    const byId = new Map();
    let leaf = null;
    for (const e of entries) { byId.set(e.id, e); leaf = e.id; }
    const target = leafId === undefined ? leaf : leafId;
    return buildSessionContext(entries, target, byId);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
