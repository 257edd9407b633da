// The reference's streaming call against a scripted server, for
// tests/differential/test_requests_vs_pi.py. `streamSimple` of each API module is what Pi's
// agent loop calls (reasoning given as a level, like picontext's StreamOptions.reasoning).
import { normalizeContext } from "../node_modules/@earendil-works/pi-ai/dist/utils/transcript.js";

const API_MODULES = {
  "openai-completions": "openai-completions.js",
  "openai-responses": "openai-responses.js",
  "anthropic-messages": "anthropic-messages.js",
  "google-generative-ai": "google-generative-ai.js",
};

// Run one call; answer the event types in order and the final message.
export async function streamOnce(model, context, options) {
  const mod = await import(`../node_modules/@earendil-works/pi-ai/dist/api/${API_MODULES[model.api]}`);
  const s = mod.streamSimple(model, normalizeContext(context), options);
  const events = [];
  for await (const ev of s) events.push(ev.type);
  const message = await s.result();
  return { events, message };
}
