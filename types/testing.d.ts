// Type declarations for `leasehold/testing`: the store kit. Written by hand.
import type { LockStore } from './index';

/** What the kit needs of a test runner's `test`: `test(name, fn)` (node:test, Vitest, Jest). */
export type KitTest = (name: string, fn: () => Promise<void>) => unknown;
/** What the kit needs of a test runner's `describe`: `describe(name, fn)`. */
export type KitDescribe = (name: string, fn: () => void) => unknown;

/**
 * What a store can do beyond acquire, renew and release. Read from the store when each
 * case runs (`subscribe`, `grantsOnRelease`, `localHandoff`, `permits`); set one to `false` to skip
 * its cases, or to `true` to hold the store to them.
 */
export interface KitCapabilities {
  /** The store has `subscribe`. */
  subscribe?: boolean;
  /** `subscribe` and `grantsOnRelease: true`: queued tries, grants told through the listener. */
  grants?: boolean;
  /** `subscribe` without grants: the listener hears each release. */
  announces?: boolean;
  /** `localHandoff`: grants above the token a holder carries, and not below the clock in µs. */
  localHandoff?: boolean;
  /**
   * `permits`: `true` for the permit cases (limit, weight, mode), `'modes'` for the
   * shared and exclusive cases alone, `false` for none.
   */
  permits?: boolean | 'modes';
}

export interface StoreKitOptions<S extends LockStore = LockStore> {
  /** Makes the store under test: a fresh one for every case (it may share a client). */
  store: () => S | Promise<S>;
  /** Ends a store `store()` made, after its case (close its subscriber, say). */
  close?: (store: S) => unknown;
  /** The runner's `test` (Vitest, Jest). Default: node:test's. */
  test?: KitTest;
  /** The runner's `describe`; the cases are registered under `name` with it. Default: node:test's, when `test` is not given. */
  describe?: KitDescribe;
  /**
   * The store's fake clock (a `FakeTimeProvider`, or anything with `now()` and
   * `advance(ms)` that the store reads): the kit advances it instead of waiting, and the
   * engine cases run their pipelines on it. Without it the kit waits in real time.
   */
  clock?: { now(): number; advance(ms: number): unknown };
  /** A lease that outlasts every case, in ms. Default 30000. */
  ttl?: number;
  /** The lease the expiry cases let end, in ms. Default 1000 on a fake clock, 500 otherwise. */
  shortTtl?: number;
  /** The ttl of the lease the engine renews in the renewal case (real time), in ms. Default 1000. */
  renewTtl?: number;
  /** The longest a case waits for anything, in ms (one store call: at most 5000). Default 20000. */
  timeout?: number;
  /** The leasehold module the engine cases use. Default: `require('leasehold')`. */
  leasehold?: object;
  /** Overrides what the kit reads from the store. */
  capabilities?: KitCapabilities;
}

/**
 * Registers the conformance cases of the `LockStore` contract (README, "A store of your
 * own") for the store `options.store()` makes: owner-checked renew and release, tokens
 * that only rise, ttl expiry, refusal of bad arguments, grants, announcements and
 * permits where the store declares them, and the store under the engine. A case that finds the
 * contract broken fails with a message saying what was broken. Throws a `TypeError`
 * naming a bad option at once.
 */
export declare function testLockStore<S extends LockStore>(name: string, options: StoreKitOptions<S>): void;
