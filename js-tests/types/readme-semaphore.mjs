/// <reference types="node" />
// The README's snippet, verbatim (js-tests/readme.test.mjs checks that it is).
import { withLock } from 'leasehold';

let running = 0;
let most = 0;
const callPartner = async () => {
  running++;
  most = Math.max(most, running);
  await new Promise((resolve) => setTimeout(resolve, 10));
  running--;
};

// Ten calls, at most three at a time; the fifth takes two of the three permits.
const calls = Array.from({ length: 10 }, (_, i) =>
  withLock('partner-api', callPartner, { limit: 3, weight: i === 4 ? 2 : 1, wait: Infinity }),
);
await Promise.all(calls);
console.log(`at most ${most} at once`);
