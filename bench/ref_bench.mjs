// Reference side of bench_session.py: times Pi 0.87.0 on the same files, in one process.
// usage: node ref_bench.mjs open FILE  |  node ref_bench.mjs append FILE N
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const { SessionManager } = await import(
  join(here, "..", "tests", "differential", "node", "node_modules", "@earendil-works", "pi-coding-agent",
       "dist", "core", "session-manager.js"));

const [mode, file, n] = process.argv.slice(2);
const dir = mkdtempSync(join(tmpdir(), "pi-bench-"));
const copy = join(dir, "s.jsonl");
copyFileSync(file, copy);
// Peak RSS from the kernel's high-water mark, reset just before the measured work.
const status = (key) => Number(readFileSync("/proc/self/status", "utf8").split(key + ":")[1].trim().split(/\s+/)[0]) * 1024;
writeFileSync("/proc/self/clear_refs", "5");
const rss0 = status("VmRSS");
let peak = rss0;
const sample = () => { peak = Math.max(peak, status("VmHWM")); };
try {
  if (mode === "open") {
    const t0 = performance.now();
    const sm = SessionManager.open(copy, dir);
    sample();
    const ctx = sm.buildSessionContext();
    sample();
    const ms = performance.now() - t0;
    console.log(JSON.stringify({ ms, messages: ctx.messages.length, peakRssDelta: peak - rss0 }));
  } else {
    const sm = SessionManager.open(copy, dir);
    sm.buildSessionContext();
    const iterations = Number(n);
    let spent = 0; // in buildSessionContext alone
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    for (let i = 0; i < iterations; i++) {
      sm.appendMessage({ role: "user", content: `more ${i}`, timestamp: Date.now() });
      const t1 = performance.now();
      sm.buildSessionContext();
      spent += performance.now() - t1;
    }
    const ms = (performance.now() - t0) / iterations;
    const cpu = process.cpuUsage(c0); // microseconds, user + system
    console.log(JSON.stringify({ msPerAppend: ms, msContext: spent / iterations,
                                 cpuMsPerAppend: (cpu.user + cpu.system) / 1000 / iterations }));
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
