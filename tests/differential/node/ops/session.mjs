// Session-layer operations composed the way the reference composes them.
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
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
//
// The reference's v1 migration mints random 8-hex ids without remembering the ones it gave
// (its `ids` set stays empty), so two entries of a large v1 file can get the same id, about once
// in 2,000 loads of real-large-session.jsonl. The duplicate makes a parentId cycle, the path walk
// never ends and node aborts ("Fatal JavaScript invalid size error"). Such a load is repeated:
// the comparison is about what the reference does when its ids are unique.
export function withLoadedCopy(path, use, migrate = migrateSessionEntries) {
  const dir = mkdtempSync(join(tmpdir(), "pi-diff-"));
  try {
    const copy = join(dir, "s.jsonl");
    for (let attempt = 1; ; attempt++) {
      copyFileSync(path, copy);
      const fileEntries = loadEntriesFromFile(copy);
      if (fileEntries.length === 0) return { invalid: true };
      migrate(fileEntries);
      const entries = fileEntries.filter((e) => e.type !== "session");
      const byId = new Map();
      let last = null;
      for (const e of entries) { byId.set(e.id, e); last = e.id; }
      const ids = entries.filter((e) => e && typeof e.id === "string").length;
      const unique = new Set(entries.filter((e) => e && typeof e.id === "string").map((e) => e.id)).size;
      if (unique < ids && attempt < 20 && isV1(path)) continue;
      return use(entries, byId, last, attempt);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function isV1(path) {
  const header = JSON.parse(readFileSync(path, "utf8").split("\n", 1)[0] || "{}");
  return !header.version || header.version < 2;
}

// The context for the given leaf ("__undefined__" = the file's last entry, as after open).
export function contextOfFile(path, leafId) {
  return withLoadedCopy(path, (entries, byId, last) =>
    buildSessionContext(entries, leafId === undefined ? last : leafId, byId));
}

// What a careful reader checks of a session file, as the reference loads it: ids stored twice,
// parents that are not stored, and the messages of the context at the last entry (as after open).
export function treeFacts(path) {
  return withLoadedCopy(path, (entries, byId, last) => {
    const ids = entries.filter((e) => e && typeof e.id === "string").map((e) => e.id);
    const seen = new Set();
    const duplicates = ids.filter((id) => seen.has(id) || !seen.add(id));
    const dangling = entries.filter((e) => e && e.parentId && !byId.has(e.parentId)).map((e) => e.id);
    const context = buildSessionContext(entries, last, byId);
    return { count: entries.length, duplicates, dangling, messages: context.messages.length };
  });
}
