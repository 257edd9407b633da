// For tests/differential/test_harness_restart.py: die in the middle of a request, the way a
// V8 fatal error (an out-of-memory abort) does.
export function crash() {
  process.exit(134);
}
