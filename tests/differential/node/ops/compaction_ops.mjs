// Compaction-planning operations for tests/differential/test_compaction_vs_pi.py, composed the way
// the reference composes them: the branch (root-first path to a leaf), its projection, the token
// estimates of that projection, the raw cut point and prepareCompaction's result as the dry-run
// report of `picontext compact --dry-run --json`.
import { buildSessionProjection } from "../node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js";
import {
  estimateContextTokens,
  estimateProjectedContextTokens,
  estimateTokens,
  findCutPoint,
  prepareCompaction,
} from "../node_modules/@earendil-works/pi-coding-agent/dist/core/compaction/compaction.js";
import { computeFileLists } from "../node_modules/@earendil-works/pi-coding-agent/dist/core/compaction/utils.js";
import { withLoadedCopy } from "./session.mjs";

const attempt = (f) => {
  try {
    return { ok: f() };
  } catch (err) {
    return { error: String(err?.message ?? err) };
  }
};

// Leaf conventions of sessiongen_ops.contextsOfFile: id, null, undefined (the last entry), {index: i}.
function resolveLeaf(leaf, entries, last) {
  if (leaf === undefined) return last;
  if (leaf !== null && typeof leaf === "object") return entries[leaf.index]?.id;
  return leaf;
}

// SessionManager.getBranch for a leaf: root-first walk of parentId links (the last entry when
// the id is unknown, nothing for null).
function branchOf(entries, byId, leafId) {
  if (leafId === null) return [];
  let current = (leafId ? byId.get(leafId) : undefined) ?? entries[entries.length - 1];
  const path = [];
  const seen = new Set();
  while (current && !seen.has(current)) {
    seen.add(current);
    path.push(current);
    current = current.parentId ? byId.get(current.parentId) : undefined;
  }
  return path.reverse();
}

export function report(prep) {
  if (!prep) return null;
  const { readFiles, modifiedFiles } = computeFileLists(prep.fileOps);
  return {
    firstKeptEntryId: prep.firstKeptEntryId,
    tokensBefore: prep.tokensBefore,
    isSplitTurn: prep.isSplitTurn,
    messagesToSummarize: prep.messagesToSummarize.length,
    turnPrefixMessages: prep.turnPrefixMessages.length,
    previousSummary: prep.previousSummary ?? null,
    readFiles,
    modifiedFiles,
  };
}

// For each leaf: {perMessage, estimate, projected} of the leaf's projection (or {error}).
export function tokensOfFile(path, leaves) {
  return withLoadedCopy(path, (entries, byId, last) => {
    const results = leaves.map((leaf) => {
      const leafId = resolveLeaf(leaf, entries, last);
      const branch = branchOf(entries, byId, leafId);
      const projection = attempt(() => buildSessionProjection(entries, leafId, byId));
      if (projection.error) return { projectionError: projection.error };
      const messages = projection.ok.messages;
      return {
        leafId: leafId ?? null,
        perMessage: messages.map((m) => attempt(() => estimateTokens(m))),
        estimate: attempt(() => estimateContextTokens(messages)),
        projected: attempt(() => estimateProjectedContextTokens(projection.ok, branch)),
      };
    });
    return { results, count: entries.length };
  });
}

// For each leaf and keepRecentTokens: the raw findCutPoint over the whole branch and the
// prepareCompaction report.
export function planOfFile(path, leaves, keeps, reserveTokens = 16384) {
  return withLoadedCopy(path, (entries, byId, last) => {
    const results = leaves.map((leaf) => {
      const leafId = resolveLeaf(leaf, entries, last);
      const branch = branchOf(entries, byId, leafId);
      return {
        leafId: leafId ?? null,
        plans: keeps.map((keep) => {
          const rep = attempt(() =>
            report(prepareCompaction(branch, { enabled: true, reserveTokens, keepRecentTokens: keep })));
          // v1 ids are minted at random by the migration: the position in the file compares instead.
          const position = rep.ok ? entries.findIndex((e) => e.id === rep.ok.firstKeptEntryId) : null;
          return { cut: attempt(() => findCutPoint(branch, 0, branch.length, keep)), report: rep, position };
        }),
      };
    });
    return { results, count: entries.length };
  });
}

// prepareCompaction on a file's current branch, timed (bench/bench_prepare.py).
export function timePrepare(path, keep, repeat) {
  return withLoadedCopy(path, (entries, byId, last) => {
    const branch = branchOf(entries, byId, last);
    const settings = { enabled: true, reserveTokens: 16384, keepRecentTokens: keep };
    const times = [];
    let result = null;
    for (let i = 0; i < repeat; i++) {
      const t0 = performance.now();
      result = prepareCompaction(branch, settings);
      times.push(performance.now() - t0);
    }
    return { times, report: report(result), branchLength: branch.length };
  });
}
