// leasehold — the public contract. Written by hand; the binding-generated declarations
// stay internal. js-tests/types type-checks every export and call form against this file;
// index.d.mts gives it to `import` as an ES module.

/** A duration: milliseconds, or a string such as `'250ms'`, `'30s'`, `'5m'`, `'1h'`, `'1m30s'`. */
export type Duration = number | string;

/** Which engine this import runs on: the native addon or the wasm module. */
export declare const engine: 'native' | 'wasm';

/** Where `init()` loads the wasm module from: a URL, a fetch of it, the compiled module or its bytes. */
export type WasmSource =
  | string
  | URL
  | Request
  | Response
  | PromiseLike<Response>
  | WebAssembly.Module
  | ArrayBuffer
  | ArrayBufferView;

/**
 * Loads the engine, once. In browsers and web workers the wasm module loads on the first
 * execution, `withLock` or `acquireLock`, from the package's own file, or from `wasm`
 * when `init({ wasm })` was called first; `await init()` before a `MemoryLockStore` or a
 * `FakeTimeProvider` is used. Elsewhere the engine loaded with the import and this
 * resolves at once. Rejects with a `TypeError` for a bad `wasm`, and with an `Error`
 * when the module cannot be loaded (a later call tries again).
 */
export declare function init(options?: { wasm?: WasmSource }): Promise<void>;
/**
 * Why Node or Bun runs the wasm engine instead of the native addon: no prebuilt addon
 * for this platform, an addon that failed to load (its error's message), or
 * `LEASEHOLD_ENGINE=wasm`. `undefined` when the engine is the one meant for this
 * runtime (the native addon on Node and Bun; wasm in browsers, workerd and Deno).
 */
export declare const engineFallbackReason: string | undefined;

/** The key of the fencing token in `context.properties`. */
export declare const LOCK_TOKEN: 'leasehold.lockToken';

/** What the callback of an execution receives. */
export interface ResilienceContext {
  /** Aborted when the caller cancels (with the caller's reason) or the lease is lost (with a `LockLostError`). */
  readonly signal: AbortSignal;
  /** The `operationKey` given to `execute`, if any. */
  readonly operationKey: string | undefined;
  /** Per-execution properties; the fencing token is under `LOCK_TOKEN`. */
  readonly properties: Map<string, unknown>;
}

/** A lease a store handed to a queued waiter as its holder released it. */
export interface LockGrant {
  /** The waiter's owner id, as it passed it to `acquire`. */
  owner: string;
  /** The new lease's fencing token. */
  fencingToken: number;
  /**
   * At most how many milliseconds ago the lease began. Absent when the store cannot tell
   * (the message overtook the answer to the owner's try): the engine then counts the lease
   * from that try, still in flight.
   */
  age?: number;
}

/**
 * Lease storage. Every method must be atomic for its key. Fencing tokens must only ever
 * increase per key, across expiry and release.
 */
export interface LockStore {
  /**
   * No live lease: store `{ owner, expires: now + ttlMs }`, bump the key's token, return it. Else `undefined`.
   * `options` is passed only to stores with `grantsOnRelease`: answer with the lease when a release
   * already handed it to `owner`, and, with `queue: true` (the try will wait), queue `owner` when the
   * key is held, to be handed the lease by a release.
   */
  acquire(
    key: string,
    owner: string,
    ttlMs: number,
    options?: PermitRequest,
  ): Promise<AcquireAnswer | undefined>;
  /**
   * The live lease belongs to `owner`: push its expiry to now + ttlMs, return true. Else false.
   * `options` is passed only to stores with `localHandoff`: see there.
   */
  renew(key: string, owner: string, ttlMs: number, options?: { fencingToken: number }): Promise<boolean>;
  /** Delete the lease only if it belongs to `owner`. `options`: as for `renew`. */
  release(key: string, owner: string, options?: { fencingToken: number }): Promise<unknown>;
  /**
   * Optional: call `onReleased()` when a lease on `key` ends, so waiters are woken at once
   * instead of at their next poll. Returns a function that stops listening. A store with
   * `grantsOnRelease` calls `onReleased(grant)` when a release handed the lease to an owner
   * it queued; the listener returns true when it claims the grant, and a grant nobody
   * claims should be released by the store, unless the store has already answered that
   * owner's `acquire` with this lease (the engine holds it then).
   */
  subscribe?(key: string, onReleased: (grant?: LockGrant) => boolean | void): () => void;
  /**
   * Optional: true when the store queues waiters (`acquire(..., { queue: true })`) and hands
   * a released lease to the first of them, telling it through `subscribe`. Read once.
   */
  readonly grantsOnRelease?: boolean;
  /**
   * Optional: this store's turn in milliseconds when one engine may hand its leases from
   * one execution to the next with no store call (README, "Your own store"). The store
   * must then: make the key's next grant larger than the `fencingToken` a `renew` or
   * `release` of the owner's live lease carries, and never grant a token below its
   * clock in microseconds. Read once.
   */
  readonly localHandoff?: number;
  /**
   * Optional: the store keeps permits (README, "A store of your own"): `true` for `limit`,
   * `weight` and `mode`, `'modes'` for shared and exclusive modes only. Locks with
   * permits on a store without it are refused with a `TypeError`. Read once.
   */
  readonly permits?: boolean | 'modes';
  /** Optional, advisory: whether `key` has a live lease. */
  isLocked?(key: string): Promise<boolean>;
  /** Optional, advisory: milliseconds left on the live lease, `undefined` when free. */
  ttl?(key: string): Promise<number | undefined>;
  /** Optional: who holds `key` and who waits for it (see {@link InspectableStore}). */
  inspect?(key: string): Promise<LockInspection | undefined>;
  /** Optional: the keys held (see {@link InspectableStore}). */
  list?(options?: ListOptions): AsyncIterable<string>;
}

/** A lease on a key, as `inspect` shows it. */
export interface InspectedHolder {
  /**
   * Its owner id. Drawn by Node or Bun: `host:pid:` (`host:pid.thread:` in a worker
   * thread), then 32 random hex digits; elsewhere the hex digits alone.
   */
  owner: string;
  /** The fencing token it was granted with (as the store knows it). */
  fencingToken: number;
  /** Milliseconds left on it, unless renewed (`Infinity`: no expiry). */
  ttl: number;
  /** On a key held with permits: how many of its `limit` this holder has. */
  weight?: number;
  /** On a key used with `mode`: the holder's. */
  mode?: 'shared' | 'exclusive';
}

/** A waiter for a key, as `inspect` shows it. */
export interface InspectedWaiter {
  /** The owner id it will hold the lease under. */
  owner: string;
  /**
   * Since when it waits, in ms on the store's clock (epoch ms; a `FakeTimeProvider`'s
   * time for a memory store on one). Absent where the store records no time (etcd).
   */
  since?: number;
}

/** What a store holds for one key: read only, nothing extended, taken or woken. */
export interface LockInspection {
  key: string;
  /** The holder of the lease (one; permits will allow several). */
  holders: InspectedHolder[];
  /** On a key held with permits: its limit (2147483647: a key used with `mode`). */
  limit?: number;
  /** The waiters, first first (none on stores that keep no queue: PostgreSQL). */
  waiters: InspectedWaiter[];
}

/** `list`'s options. */
export interface ListOptions {
  /** Only keys that start with this (default: every key). */
  prefix?: string;
  /** At most this many keys (default: all; 0 lists none). */
  limit?: number;
}

/** A store that shows who holds what. */
export interface InspectableStore {
  /**
   * The holder of `key` and its waiters in queue order, `undefined` when nobody holds or
   * waits for it. Advisory: the answer may be stale when it arrives.
   */
  inspect(key: string): Promise<LockInspection | undefined>;
  /**
   * The keys held, fetched a page at a time (memory stays bounded however many keys the
   * store has). Options are checked when called: a `TypeError`/`RangeError` then.
   */
  list(options?: ListOptions): AsyncIterable<string>;
}

/** A clock that moves only when told to; every timer of the engine on it runs as it moves. */
export declare class FakeTimeProvider {
  /**
   * @param start the initial time in milliseconds (default 0), at most
   * `Number.MAX_SAFE_INTEGER` (a `RangeError` otherwise).
   */
  constructor(start?: number);
  /** The fake time in milliseconds. */
  now(): number;
  /**
   * Moves time forward by `ms`, running every due timer (polls, renewals, expiries) at its
   * own instant, in order. Timers run on whole milliseconds; fractions of one add up
   * (3 × `advance(1000 / 3)` is 1000 ms). Moving past `Number.MAX_SAFE_INTEGER` is a
   * `RangeError`. JS stores answer through Promises: advance in steps and let them
   * settle (`await` something) between steps when a test needs their answers.
   */
  advance(ms: number): void;
}

/** The in-process store, native to the engine. One per time provider is the default. */
export declare class MemoryLockStore implements LockStore, InspectableStore {
  constructor(options?: { timeProvider?: FakeTimeProvider });
  /** Keys held or waited for. */
  readonly size: number;
  /** Keeps permits: `limit`, `weight` and `mode`. */
  readonly permits: true;
  acquire(key: string, owner: string, ttlMs: number, options?: PermitRequest): Promise<AcquireAnswer | undefined>;
  renew(key: string, owner: string, ttlMs: number): Promise<boolean>;
  /** True when `owner` held a live lease that is now released. */
  release(key: string, owner: string): Promise<boolean>;
  isLocked(key: string): Promise<boolean>;
  ttl(key: string): Promise<number | undefined>;
  /** The holder and the engine's waiters in arrival order (`since` on the store's clock). */
  inspect(key: string): Promise<LockInspection | undefined>;
  /** The keys held, in order, a page of 256 at a time. */
  list(options?: ListOptions): AsyncIterable<string>;
}

export interface LockLostArgs {
  context: ResilienceContext;
  key: string;
}

export interface LockOptions {
  /**
   * The key, or a function of the context. Absent: the execution's `operationKey`. A key
   * with a lone surrogate (not well-formed UTF-16) is a `TypeError`.
   */
  key?: string | ((context: ResilienceContext) => string);
  /** Lease length, renewed every ttl/3 while the callback runs. Default 30 s. */
  ttl?: Duration;
  /** How long to wait for a held lock. Default 0 (fail fast); `Infinity` waits as long as it takes. */
  wait?: Duration;
  /** Where leases live. Default: the memory store of the pipeline's time provider. */
  store?: LockStore;
  /** Called once when the lease is lost while the callback runs. */
  onLockLost?: (args: LockLostArgs) => void | Promise<void>;
  /**
   * A name for telemetry (default `'lock'`) and for people reading the lock's owner ids:
   * when given, every owner drawn for it reads `host:pid:<name>:<random hex>` (the name
   * made one word, at most 64 characters).
   */
  name?: string;
  /**
   * On a store that hands leases over between executions (`localHandoff`: Redis,
   * PostgreSQL): how long a released lease stays in this process for the next execution
   * here that asks for it, with no store call. Meanwhile other processes find the key
   * held. Default 0; at most the store's turn (`handOffAfter`).
   */
  linger?: Duration;
  /** At most this many holders of the key at once (weights summed). Default 1. */
  limit?: number;
  /** How many of the key's `limit` permits this holder takes: 1 (default) to `limit`. */
  weight?: number;
  /**
   * `'shared'` holders run together, an `'exclusive'` one alone (a read/write lock).
   * Not combined with `limit` or `weight`.
   */
  mode?: 'shared' | 'exclusive';
}

/**
 * `acquire`'s fourth argument: `queue` on a store that grants on release; `limit` and
 * `weight` for a lock with permits (a mode is permits of 2147483647: a reader takes 1,
 * a writer all).
 */
export type AcquireAnswer = { fencingToken: number; limit?: never } | { limit: number; fencingToken?: never };

export interface PermitRequest {
  queue?: boolean;
  limit?: number;
  weight?: number;
}

export type TelemetryEvent =
  | { type: 'acquired'; key: string; name: string; operationKey?: string; waitedMs: number; fencingToken: number }
  | { type: 'rejected'; key: string; name: string; operationKey?: string; waitedMs: number }
  | { type: 'renewed'; key: string; name: string; operationKey?: string; fencingToken: number }
  | { type: 'renewalFailed'; key: string; name: string; operationKey?: string; error: unknown }
  | { type: 'lost'; key: string; name: string; operationKey?: string }
  | { type: 'released'; key: string; name: string; operationKey?: string }
  | { type: 'releaseFailed'; key: string; name: string; operationKey?: string; error: unknown };

export interface ResiliencePipelineBuilderOptions {
  timeProvider?: FakeTimeProvider;
  telemetry?: (event: TelemetryEvent) => void;
  /**
   * Whether `getLockToken()` without a context finds the token inside callbacks. Default
   * true. With `false`, read it from the callback's context (`getLockToken(context)`);
   * `getLockToken()` is `undefined` inside them, and these executions never turn on the
   * promise hooks that AsyncLocalStorage needs on Node 20 and 22 (without
   * `--experimental-async-context-frame`).
   */
  ambientToken?: boolean;
  /**
   * OpenTelemetry: where `@opentelemetry/api` resolves and a meter or tracer provider is
   * registered when the pipeline is built, it records `leasehold.*` metrics and a span per
   * lock (README, "Metrics and traces"). `false` turns that off for this pipeline;
   * `{ key: true }` adds the lock's key as an attribute (mind the cardinality).
   */
  openTelemetry?: false | { key?: boolean };
}

export interface ExecuteOptions {
  operationKey?: string;
  signal?: AbortSignal;
}

export type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

export declare class ResiliencePipeline {
  private constructor();
  /**
   * Runs `callback` while holding every lock of the pipeline, outermost first.
   * Rejects with `LockNotAcquiredError`, `LockLostError`, `LockStoreError`, the caller's
   * abort reason, or the callback's own error.
   */
  execute<T>(callback: (context: ResilienceContext) => T | PromiseLike<T>, options?: ExecuteOptions): Promise<T>;
  /** Like `execute`, but never rejects. */
  settle<T>(callback: (context: ResilienceContext) => T | PromiseLike<T>, options?: ExecuteOptions): Promise<Outcome<T>>;
}

export declare class ResiliencePipelineBuilder {
  constructor(options?: ResiliencePipelineBuilderOptions);
  /** Adds a lock; the first added is outermost. Throws `TypeError`/`RangeError` for bad options. */
  addLock(options: LockOptions): this;
  build(): ResiliencePipeline;
}

/** The lock stayed held for longer than `wait`; the callback never ran. */
export declare class LockNotAcquiredError extends Error {
  constructor(key: string, message?: string, options?: ErrorOptions);
  readonly code: 'LOCK_NOT_ACQUIRED';
  readonly key: string;
  readonly httpStatus: 409;
}

/**
 * The lease was lost while the callback ran (also the abort reason of its signal), or, in
 * a pipeline of several locks, an outer lease before the callback started.
 */
export declare class LockLostError extends Error {
  constructor(key: string, message?: string, options?: ErrorOptions);
  readonly code: 'LOCK_LOST';
  readonly key: string;
}

/** The store failed; `cause` is what it threw. */
export declare class LockStoreError extends Error {
  constructor(key: string, method: 'acquire' | 'renew' | 'release', message?: string, options?: ErrorOptions);
  readonly code: 'LOCK_STORE_FAILED';
  readonly key: string;
  readonly method: 'acquire' | 'renew' | 'release';
  readonly cause: unknown;
}

/**
 * The key is held (or waited for) with another limit than the lock's: permits of
 * different limits never share a key (a plain lock is a limit of 1).
 */
export declare class LockLimitMismatchError extends Error {
  constructor(key: string, limit: number, heldWith: number, message?: string);
  readonly code: 'LOCK_LIMIT_MISMATCH';
  readonly key: string;
  /** The lock's limit (2147483647: a lock with `mode`). */
  readonly limit: number;
  /** The limit the key's holders use. */
  readonly heldWith: number;
}

/** True for `LockNotAcquiredError`: "someone else has it", not a fault. */
export declare function isRejection(error: unknown): error is LockNotAcquiredError;

/**
 * The fencing token of the innermost lock the code runs under; `undefined` outside any
 * lock. Without `context`, a callback of a pipeline built with `ambientToken: false` runs
 * under no lock.
 */
export declare function getLockToken(context?: ResilienceContext): number | undefined;

/** A lease held by hand (from `acquireLock`). */
export interface LeaseHandle {
  readonly key: string;
  readonly owner: string;
  readonly fencingToken: number;
  /** Aborted with a `LockLostError` when an auto-renewed lease is lost. */
  readonly signal: AbortSignal;
  /**
   * Releases the lease. True only if this owner still held it; false after a lapse or a
   * takeover. Rejects with a `LockStoreError` when the store fails to release it.
   */
  release(): Promise<boolean>;
  /** Pushes the lease out to now + `ttl` (default: its own ttl). False once it is gone. */
  extend(ttl?: Duration): Promise<boolean>;
}

export interface AcquireLockOptions {
  /** How long to wait for a held key. Default 0. */
  wait?: Duration;
  /** Aborting it while waiting rejects with its reason. */
  signal?: AbortSignal;
  /** Renew every ttl/3 until released; the handle's signal aborts on loss. Default false. */
  autoRenew?: boolean;
  /**
   * The clock for stores that are not a `MemoryLockStore`. A `MemoryLockStore` brings its
   * own: another one here is a `TypeError`.
   */
  timeProvider?: FakeTimeProvider;
  /** A name carried in the lease's owner id (`host:pid:<name>:<random hex>`). */
  name?: string;
  /** Permits, as for `addLock`: at most `limit` holders (weights summed). */
  limit?: number;
  /** Permits this lease takes, as for `addLock`. */
  weight?: number;
  /** Shared or exclusive, as for `addLock`. */
  mode?: 'shared' | 'exclusive';
}

/**
 * Acquires a lease by hand. Resolves to a handle, or `undefined` when the key stays held
 * past `wait`. Rejects with `LockStoreError` when the store fails, or the abort reason.
 */
export declare function acquireLock(
  store: LockStore,
  key: string,
  ttl: Duration,
  options?: AcquireLockOptions,
): Promise<LeaseHandle | undefined>;

/** `campaign`'s options. */
export interface CampaignOptions {
  /** Where the election is held: the lease on the key is the leadership. */
  store: LockStore;
  /** The lease's ttl: a crashed leader is replaced this long after its last renewal. Default 30 s. */
  ttl?: Duration;
  /** What `leader()` shows for this candidate while it leads (at most 128 characters). */
  name?: string;
  /** Aborting it while waiting leaves the line (the campaign rejects with its reason); while leading, steps down. */
  signal?: AbortSignal;
}

/** One term of office, from `campaign` or passed to `lead`'s callback. */
export interface Leadership {
  readonly key: string;
  /** The lease's fencing token: larger for every new leader. Fence your writes with it. */
  readonly term: number;
  readonly name: string | undefined;
  readonly owner: string;
  /**
   * Aborts when the leadership ends: a `LockLostError` once the lease may have run out or
   * could not be renewed (read as aborted from that moment, before any timer runs), an
   * `AbortError` on `resign()`, the campaign signal's reason when it aborts.
   */
  readonly signal: AbortSignal;
  /** Steps down at once: aborts `signal`, releases the lease. True if it was still held; false after a loss or on a second call. */
  resign(): Promise<boolean>;
}

/**
 * Waits in line for `key` until this process leads. Rejects with the signal's reason when
 * it aborts first, with a `LockStoreError` when the store fails.
 */
export declare function campaign(key: string, options: CampaignOptions): Promise<Leadership>;

/** `lead`'s options. */
export interface LeadOptions extends CampaignOptions {
  /**
   * Called with what the callback threw while it led, after stepping down; lead() then
   * campaigns again. Without it, lead() rejects with that error.
   */
  onError?: (error: unknown, leadership: Leadership) => void;
}

/**
 * Campaigns for `key` and runs `fn` for each term won, campaigning again after each,
 * until `options.signal` aborts; then resolves. A term ends when `fn` settles (the lease
 * is released at once) or leadership is lost.
 */
export declare function lead(key: string, fn: (leadership: Leadership) => unknown, options: LeadOptions): Promise<void>;

/** Who leads a key, as `leader` and `watchLeader` show it. */
export interface LeaderInfo {
  readonly key: string;
  /** The name the leader campaigned with, if any. */
  readonly name: string | undefined;
  readonly owner: string;
  readonly term: number;
  /** Milliseconds left on its lease unless renewed. */
  readonly ttl: number;
}

/** Who leads `key` on `store` now; `undefined` when nobody does. A `TypeError` for a store without `inspect`. */
export declare function leader(store: LockStore, key: string): Promise<LeaderInfo | undefined>;

export interface WatchLeaderOptions {
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** How often to look where the store announces nothing. Default 1 s. */
  interval?: Duration;
}

/** The leader now (or `undefined`), then each change of leader, until `signal` aborts or the loop breaks. */
export declare function watchLeader(store: LockStore, key: string, options?: WatchLeaderOptions): AsyncIterableIterator<LeaderInfo | undefined>;

/** A lock key: a string, or a function of the execution's context. */
export type LockKey = string | ((context: ResilienceContext) => string);

/** `withLock`'s options: a lock's, a builder's and an execution's, in one object. */
export interface WithLockOptions
  extends Omit<LockOptions, 'key' | 'wait'>,
    ResiliencePipelineBuilderOptions,
    ExecuteOptions {
  /**
   * How long to wait for a held key. Default: the lock's `ttl` (30 s unless set), longer
   * than a lease left by a crashed holder lasts; 0 with `skipOnLockFailure`.
   * `Infinity` waits as long as it takes.
   */
  wait?: Duration;
  /**
   * Resolve `undefined` instead of rejecting with `LockNotAcquiredError` when the key
   * stays held past `wait` (the function never runs). Default false.
   */
  skipOnLockFailure?: boolean;
}

/** `withLock`'s options with the key in them (or an `operationKey` standing for it). */
export type WithLockKeyedOptions = WithLockOptions &
  ({ key: LockKey } | { key?: undefined; operationKey: string });

type Skipping = { skipOnLockFailure: true };
type NotSkipping = { skipOnLockFailure?: false };

type MethodDecorator<This, Args extends unknown[], R> = (
  method: (this: This, ...args: Args) => Promise<R>,
  context: ClassMethodDecoratorContext<This, (this: This, ...args: Args) => Promise<R>>,
) => (this: This, ...args: Args) => Promise<R>;

/**
 * Runs `fn` under one lock on `key`, waiting for a held key up to `wait` (default: the
 * ttl). Resolves to `fn`'s value; `undefined` when `skipOnLockFailure` skipped it.
 */
export declare function withLock<T>(
  key: LockKey,
  fn: (context: ResilienceContext) => T | PromiseLike<T>,
  options: WithLockOptions & Skipping,
): Promise<T | undefined>;
export declare function withLock<T>(
  key: LockKey,
  fn: (context: ResilienceContext) => T | PromiseLike<T>,
  options?: WithLockOptions & NotSkipping,
): Promise<T>;
export declare function withLock<T>(
  key: LockKey,
  fn: (context: ResilienceContext) => T | PromiseLike<T>,
  options: WithLockOptions,
): Promise<T | undefined>;
/** `withLock({ key, ...options }, fn)`: the same, with the key among the options. */
export declare function withLock<T>(
  options: WithLockKeyedOptions & Skipping,
  fn: (context: ResilienceContext) => T | PromiseLike<T>,
): Promise<T | undefined>;
export declare function withLock<T>(
  options: WithLockKeyedOptions & NotSkipping,
  fn: (context: ResilienceContext) => T | PromiseLike<T>,
): Promise<T>;
export declare function withLock<T>(
  options: WithLockKeyedOptions,
  fn: (context: ResilienceContext) => T | PromiseLike<T>,
): Promise<T | undefined>;
/**
 * A method decorator (standard decorators): every call of the method runs under the
 * lock. With `skipOnLockFailure`, the method's result type must admit `undefined`.
 */
export declare function withLock<This, Args extends unknown[], R>(
  key: LockKey,
  options: WithLockOptions & Skipping,
): MethodDecorator<This, Args, R | undefined>;
export declare function withLock<This, Args extends unknown[], R>(
  key: LockKey,
  options?: WithLockOptions & NotSkipping,
): MethodDecorator<This, Args, R>;
export declare function withLock<This, Args extends unknown[], R>(
  key: LockKey,
  options: WithLockOptions,
): MethodDecorator<This, Args, R | undefined>;
export declare function withLock<This, Args extends unknown[], R>(
  options: WithLockKeyedOptions & Skipping,
): MethodDecorator<This, Args, R | undefined>;
export declare function withLock<This, Args extends unknown[], R>(
  options: WithLockKeyedOptions & NotSkipping,
): MethodDecorator<This, Args, R>;
export declare function withLock<This, Args extends unknown[], R>(
  options: WithLockKeyedOptions,
): MethodDecorator<This, Args, R | undefined>;

declare const api: {
  engine: typeof engine;
  init: typeof init;
  engineFallbackReason: typeof engineFallbackReason;
  LOCK_TOKEN: typeof LOCK_TOKEN;
  ResiliencePipelineBuilder: typeof ResiliencePipelineBuilder;
  ResiliencePipeline: typeof ResiliencePipeline;
  MemoryLockStore: typeof MemoryLockStore;
  FakeTimeProvider: typeof FakeTimeProvider;
  LockNotAcquiredError: typeof LockNotAcquiredError;
  LockLostError: typeof LockLostError;
  LockStoreError: typeof LockStoreError;
  LockLimitMismatchError: typeof LockLimitMismatchError;
  isRejection: typeof isRejection;
  getLockToken: typeof getLockToken;
  acquireLock: typeof acquireLock;
  withLock: typeof withLock;
  campaign: typeof campaign;
  lead: typeof lead;
  leader: typeof leader;
  watchLeader: typeof watchLeader;
};
export default api;
