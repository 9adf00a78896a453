/// <reference types="node" />
// The README's snippet, verbatim (js-tests/readme.test.mjs checks that it is).
import { withLock } from 'leasehold';

let balance = 100;
await Promise.all([30, 50].map((amount) =>
  withLock('account:42', async () => {          // the second waits for the first
    const seen = balance;                        // read…
    await new Promise((r) => setTimeout(r, 10)); // …something slow…
    balance = seen - amount;                     // …write: never interleaved
  })));
console.log(balance); // 20 (without the lock: 50)
