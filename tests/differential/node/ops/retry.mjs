// Overflow and retry classification composed the way the reference composes it.
// AgentSession._isRetryableError is a private method (agent-session.js), so `classify`
// reproduces it from the exported pieces it calls: not isContextOverflow(message,
// model.contextWindow ?? 0) and isRetryableAssistantError(message).
import {
  isContextOverflow,
  isRecoverableLength,
} from "../node_modules/@earendil-works/pi-ai/dist/utils/overflow.js";
import {
  isRetryableAssistantError,
  retryDelayMs,
} from "../node_modules/@earendil-works/pi-ai/dist/utils/retry.js";

// All verdicts for one assistant message. `contextWindow` / `desiredMaxOutput` may be undefined.
export function classify(message, contextWindow, desiredMaxOutput) {
  return {
    overflow: isContextOverflow(message, contextWindow),
    overflowWithoutWindow: isContextOverflow(message),
    recoverableLength: desiredMaxOutput === undefined ? null : isRecoverableLength(message, desiredMaxOutput),
    retryableAssistantError: isRetryableAssistantError(message),
    sessionRetryable: !isContextOverflow(message, contextWindow ?? 0) && isRetryableAssistantError(message),
  };
}

export function classifyMany(items) {
  return items.map(([message, contextWindow, desiredMaxOutput]) =>
    classify(message, contextWindow, desiredMaxOutput));
}

export function delays(policy, attempts) {
  return attempts.map((n) => retryDelayMs(policy, n));
}
