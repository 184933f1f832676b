// The tests' polling helpers; the implementation is shared with the scripts (scripts/lib/wait.mjs).
export { Exited, waitFor, waitForValue, type WaitOptions } from '../../scripts/lib/wait.mjs';
