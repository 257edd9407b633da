// For tests/differential/test_harness_restart.py: die in the middle of a request, the way a
// V8 fatal error (an out-of-memory abort) does.
export function crash() {
  process.exit(134);
}

import { migrateSessionEntries } from "../node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js";
import { withLoadedCopy } from "./session.mjs";

// Load a v1 file whose first migration mints a duplicate id (what the reference's random ids
// do now and then); returns how many loads it took and whether the ids it used are unique.
export function loadWithOneIdCollision(path) {
  let calls = 0;
  const migrate = (entries) => {
    migrateSessionEntries(entries);
    calls += 1;
    const rest = entries.filter((e) => e.type !== "session");
    if (calls === 1 && rest.length > 2) {
      rest[2].id = rest[0].id;
      rest[3].parentId = rest[2].id;
    }
  };
  return withLoadedCopy(path, (entries, byId, last, attempt) => ({
    attempt,
    unique: new Set(entries.map((e) => e.id)).size === entries.length,
  }), migrate);
}
