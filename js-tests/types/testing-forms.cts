// Type test of `require('leasehold/testing')`, compiled as CommonJS.
import testing = require('leasehold/testing');
import leasehold = require('leasehold');

export function required(): void {
  testing.testLockStore('memory', { store: () => new leasehold.MemoryLockStore() });
}
