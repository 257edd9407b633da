// Pi's side of bench_cli.py, one whole node process per call, as a Pi user would run it:
//   node pi_cli.mjs context FILE     loadEntriesFromFile + migrate + buildSessionContext, JSON on stdout
//   node pi_cli.mjs list             SessionManager.listAll() (agent dir from PI_CODING_AGENT_DIR)
//   node pi_cli.mjs prepare FILE     open + getBranch + prepareCompaction (what /compact plans on)
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "..", "tests", "differential", "node", "node_modules", "@earendil-works", "pi-coding-agent",
  "dist", "core");
const sessions = await import(join(dist, "session-manager.js"));
const [mode, file] = process.argv.slice(2);

if (mode === "context") {
  const fileEntries = sessions.loadEntriesFromFile(file);
  sessions.migrateSessionEntries(fileEntries);
  const entries = fileEntries.filter((e) => e.type !== "session");
  const byId = new Map(entries.map((e) => [e.id, e]));
  const context = sessions.buildSessionContext(entries, entries.length ? entries[entries.length - 1].id : null, byId);
  process.stdout.write(JSON.stringify(context) + "\n");
} else if (mode === "list") {
  const infos = await sessions.SessionManager.listAll();
  process.stdout.write(JSON.stringify(infos.map((i) => ({ path: i.path, messageCount: i.messageCount }))) + "\n");
} else if (mode === "prepare") {
  const { prepareCompaction } = await import(join(dist, "compaction", "compaction.js"));
  const sm = sessions.SessionManager.open(file, dirname(file));
  const t0 = performance.now();
  const prep = prepareCompaction(sm.getBranch(), { enabled: true, reserveTokens: 16384, keepRecentTokens: 20000 });
  process.stdout.write(JSON.stringify({ ms: performance.now() - t0, kept: prep?.firstKeptEntryId }) + "\n");
}
