// Type test of `leasehold/testing`, the store kit: each call form, and mistakes refused.
import { FakeTimeProvider, MemoryLockStore } from 'leasehold';
import * as leasehold from 'leasehold';
import { testLockStore, type StoreKitOptions } from 'leasehold/testing';

export function forms(): void {
  // node:test by default
  testLockStore('memory', { store: () => new MemoryLockStore() });
  // a fake clock, an async factory, close
  const clock = new FakeTimeProvider();
  testLockStore('memory on fake time', {
    store: async () => new MemoryLockStore({ timeProvider: clock }),
    close: (store: MemoryLockStore) => void store,
    clock,
    ttl: 10_000,
    shortTtl: 500,
    renewTtl: 900,
    timeout: 5000,
    leasehold,
    capabilities: { grants: false },
  });
  // Vitest / Jest style
  const test = (name: string, fn: () => Promise<void>): void => void [name, fn];
  const describe = (name: string, fn: () => void): void => void [name, fn];
  testLockStore('injected', { store: () => new MemoryLockStore(), test, describe });
  // permits: all of them, the modes alone, or none
  testLockStore('modes', { store: () => new MemoryLockStore(), capabilities: { permits: 'modes' } });
  testLockStore('no permits', { store: () => new MemoryLockStore(), capabilities: { permits: false } });
  const options: StoreKitOptions = { store: () => ({ acquire: async () => undefined, renew: async () => false, release: async () => {} }) };
  testLockStore('a plain object', options);
}

export function mistakes(): void {
  // @ts-expect-error the store option is required
  testLockStore('x', {});
  // @ts-expect-error `store` makes the store: a function, not the store
  testLockStore('x', { store: new MemoryLockStore() });
  // @ts-expect-error capabilities are booleans
  testLockStore('x', { store: () => new MemoryLockStore(), capabilities: { grants: 'yes' } });
  // @ts-expect-error permits is a boolean or 'modes'
  testLockStore('x', { store: () => new MemoryLockStore(), capabilities: { permits: 'weights' } });
}
