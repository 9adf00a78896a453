// The store kit (`leasehold/testing`) on the stores that need no server: the memory
// store on fake time and on the real clock. Runs once per engine.
import { FakeTimeProvider, MemoryLockStore } from './support/leasehold.mjs';
import { testLockStore } from 'leasehold/testing';

const clock = new FakeTimeProvider();
testLockStore('MemoryLockStore on fake time', { store: () => new MemoryLockStore({ timeProvider: clock }), clock });
testLockStore('MemoryLockStore on the real clock', { store: () => new MemoryLockStore() });
