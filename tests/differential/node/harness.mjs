// Long-lived bridge to the Pi reference for picontext's differential tests.
// Reads one JSON request per line on stdin, answers one JSON line on stdout:
//   {"id": n, "call": "<module path under node_modules/@earendil-works>#<export>", "args": [...]}
//   {"id": n, "op": "<ops file stem>.<function>", "args": [...]}
// The string "__undefined__" in args stands for JavaScript's undefined.
// Answers: {"id": n, "ok": true, "value": ...} or {"id": n, "ok": false, "error": "..."}.
import { createInterface } from "node:readline";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkgRoot = join(here, "node_modules", "@earendil-works");
const modules = new Map();
const ops = {};

for (const file of readdirSync(join(here, "ops"))) {
  if (!file.endsWith(".mjs")) continue;
  ops[file.slice(0, -4)] = await import(pathToFileURL(join(here, "ops", file)).href);
}

async function loadModule(path) {
  if (!modules.has(path)) modules.set(path, await import(pathToFileURL(join(pkgRoot, path)).href));
  return modules.get(path);
}

const revive = (v) =>
  v === "__undefined__" ? undefined
  : Array.isArray(v) ? v.map(revive)
  : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, revive(x)]))
  : v;

async function handle(req) {
  const args = revive(req.args ?? []);
  if (req.call) {
    const [path, name] = req.call.split("#");
    const mod = await loadModule(path);
    return await mod[name](...args);
  }
  const [file, name] = req.op.split(".");
  return await ops[file][name](...args);
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let req;
  try {
    req = JSON.parse(line);
    const value = await handle(req);
    process.stdout.write(JSON.stringify({ id: req.id, ok: true, value: value ?? null }) + "\n");
  } catch (err) {
    process.stdout.write(JSON.stringify({ id: req?.id, ok: false, error: String(err?.message ?? err) }) + "\n");
  }
}
