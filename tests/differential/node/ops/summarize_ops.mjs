// Summarization helpers of the reference, for tests/differential/test_serialize_vs_pi.py.
import {
  computeFileLists,
  createFileOps,
  extractFileOpsFromMessage,
  formatFileOperations,
  serializeConversation,
} from "../node_modules/@earendil-works/pi-coding-agent/dist/core/compaction/utils.js";

// serializeConversation over many message lists at once (one round trip per batch).
export function serializeBatch(batches) {
  return batches.map((messages) => serializeConversation(messages));
}

// The file-list block the reference appends to a summary, from the tool calls of `messages`.
export function fileListBlock(messages) {
  const ops = createFileOps();
  for (const m of messages) extractFileOpsFromMessage(m, ops);
  const { readFiles, modifiedFiles } = computeFileLists(ops);
  return { readFiles, modifiedFiles, block: formatFileOperations(readFiles, modifiedFiles) };
}
