// In-process locks, one factory per library, each used the way its README shows.
// `createMemoryLock(name, { singleKey, wait })` resolves to `run(key, fn)`, which runs
// `fn` holding the lock on `key` (on `singleKey` when given: the library's one-lock
// form, no per-call key lookup) and resolves to its value.
//
// - floor: the least a correct per-key FIFO lock can do in JavaScript, a promise chain
//   per key, the map entry dropped when the chain ends.
// - async-mutex: `Mutex#runExclusive`, loaded with `require`: its CommonJS build
//   (lib/index.js, generators down-levelled by tslib) is about 4× faster than the ESM
//   build that `import` resolves to (index.mjs, native generators). For many keys a Map of
//   mutexes, each dropped when it is idle again (async-mutex has no keyed form).
// - async-sema: `new Sema(1)`, `acquire()`/`release()` around the call; for many keys a
//   Map of semaphores, each dropped by the last call that uses it (it has no keyed
//   form). CommonJS only.
// - henrygd-semaphore: `@henrygd/semaphore`'s keyed `getSemaphore(key, 1)`, which drops
//   idle keys itself; with one key the semaphore is fetched once and kept.
// - verrou: `@verrou/core` with its memory store, `createLock(key, ttl).run(fn)`;
//   waiting is its own retry loop (default delay 250 ms).
// - leasehold-native / leasehold-wasm: a pipeline on the default MemoryLockStore; the
//   engine is chosen by LEASEHOLD_ENGINE before this module is imported. With one key
//   the lock is defined with it (`addLock({ key })`); `-opkey` passes it per execution
//   as `operationKey` instead, `-withlock` calls `withLock(key, fn)`, `-noambient` is the
//   first built with `ambientToken: false` (callbacks read the token from their context).

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export const MEMORY_LIBS = ['floor', 'async-mutex', 'async-sema', 'henrygd-semaphore', 'verrou', 'leasehold-native', 'leasehold-wasm'];

const TTL_MS = 30_000;

function floorLock() {
  const tails = new Map();
  return async function run(key, fn) {
    const previous = tails.get(key);
    let release;
    const mine = new Promise((resolve) => {
      release = resolve;
    });
    tails.set(key, mine);
    if (previous !== undefined) await previous;
    try {
      return await fn();
    } finally {
      if (tails.get(key) === mine) tails.delete(key);
      release();
    }
  };
}

async function asyncMutexLock({ singleKey }) {
  const { Mutex } = require('async-mutex');
  if (singleKey !== undefined) {
    const mutex = new Mutex();
    return (_key, fn) => mutex.runExclusive(fn);
  }
  const mutexes = new Map();
  return async function run(key, fn) {
    let mutex = mutexes.get(key);
    if (mutex === undefined) {
      mutex = new Mutex();
      mutexes.set(key, mutex);
    }
    try {
      return await mutex.runExclusive(fn);
    } finally {
      if (!mutex.isLocked() && mutexes.get(key) === mutex) mutexes.delete(key);
    }
  };
}

function asyncSemaLock({ singleKey }) {
  const { Sema } = require('async-sema');
  const holding = async (sema, fn) => {
    await sema.acquire();
    try {
      return await fn();
    } finally {
      sema.release();
    }
  };
  if (singleKey !== undefined) {
    const sema = new Sema(1);
    return (_key, fn) => holding(sema, fn);
  }
  // Each entry counts the calls that hold or wait for it: it is dropped by the last.
  const semas = new Map();
  return async function run(key, fn) {
    let entry = semas.get(key);
    if (entry === undefined) {
      entry = { sema: new Sema(1), users: 0 };
      semas.set(key, entry);
    }
    entry.users++;
    try {
      return await holding(entry.sema, fn);
    } finally {
      if (--entry.users === 0) semas.delete(key);
    }
  };
}

async function henrygdLock({ singleKey }) {
  const { getSemaphore } = await import('@henrygd/semaphore');
  const holding = async (semaphore, fn) => {
    await semaphore.acquire();
    try {
      return await fn();
    } finally {
      semaphore.release();
    }
  };
  if (singleKey !== undefined) {
    const semaphore = getSemaphore(singleKey, 1);
    return (_key, fn) => holding(semaphore, fn);
  }
  return (key, fn) => holding(getSemaphore(key, 1), fn);
}

async function verrouLock({ singleKey }) {
  const { Verrou } = await import('@verrou/core');
  const { memoryStore } = await import('@verrou/core/drivers/memory');
  const verrou = new Verrou({ default: 'memory', stores: { memory: { driver: memoryStore() } } });
  return async function run(key, fn) {
    const [acquired, value] = await verrou.createLock(singleKey ?? key, TTL_MS).run(fn);
    if (!acquired) throw new Error('verrou: lock not acquired');
    return value;
  };
}

async function leaseholdLock({ singleKey, wait }, engine, form) {
  if ((process.env.LEASEHOLD_ENGINE ?? '') !== engine) {
    throw new Error(`leasehold-${engine} needs LEASEHOLD_ENGINE=${engine} before import`);
  }
  const api = (await import('../../lib/entries/index.mjs')).default;
  if (api.engine !== engine) throw new Error(`asked for the ${engine} engine, got ${api.engine}`);
  // withLock as its README shows it, defaults and all (scenario 1 only: it never waits).
  if (form === 'withlock') return (key, fn) => api.withLock(key, fn);
  if (singleKey !== undefined && form !== 'opkey') {
    const builder = new api.ResiliencePipelineBuilder({ ambientToken: form !== 'noambient' });
    const pipeline = builder.addLock({ key: singleKey, ttl: TTL_MS, wait }).build();
    return (_key, fn) => pipeline.execute(fn);
  }
  const pipeline = new api.ResiliencePipelineBuilder().addLock({ ttl: TTL_MS, wait }).build();
  return (key, fn) => pipeline.execute(fn, { operationKey: key });
}

/** `wait` in ms (Infinity: as long as it takes); only leasehold needs to be told. */
export async function createMemoryLock(name, { singleKey, wait = 0 } = {}) {
  switch (name) {
    case 'floor':
      return floorLock();
    case 'async-mutex':
      return asyncMutexLock({ singleKey });
    case 'async-sema':
      return asyncSemaLock({ singleKey });
    case 'henrygd-semaphore':
      return henrygdLock({ singleKey });
    case 'verrou':
      return verrouLock({ singleKey });
    default: {
      const [, engine, form] = name.split('-');
      if (name.startsWith('leasehold-') && ['native', 'wasm'].includes(engine) && [undefined, 'opkey', 'withlock', 'noambient'].includes(form)) {
        return leaseholdLock({ singleKey, wait }, engine, form);
      }
      throw new Error(`unknown memory library ${name}`);
    }
  }
}

/** Entries the leasehold engine keeps in its default memory store (0 for the others). */
export async function engineEntries(name) {
  if (!name.startsWith('leasehold')) return undefined;
  const api = (await import('../../lib/entries/index.mjs')).default;
  const internals = api[Symbol.for('leasehold.internals')];
  return internals.hostOf(undefined).engine.memEntries(0);
}
