'use strict';
// Property keys the host's modules share and users cannot reach by name.

/** The EngineHost of a FakeTimeProvider or a MemoryLockStore. */
const HOST = Symbol('leasehold.host');
/** A MemoryLockStore's id in its engine. */
const STORE_ID = Symbol('leasehold.storeId');
/** The FakeTimeProvider a MemoryLockStore was made on, if any. */
const TIME_PROVIDER = Symbol('leasehold.timeProvider');

module.exports = { HOST, STORE_ID, TIME_PROVIDER };
