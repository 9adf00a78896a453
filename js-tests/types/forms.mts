// Type test, one function per documented call form, as an ES module. Compiled under
// `moduleResolution: nodenext` (tsconfig.json) and `bundler` (tsconfig.bundler.json);
// each @ts-expect-error proves the declarations reject a mistake.
import leasehold, {
  engine,
  engineFallbackReason,
  withLock,
  acquireLock,
  MemoryLockStore,
  ResiliencePipelineBuilder,
  LockNotAcquiredError,
  isRejection,
  type ResilienceContext,
  type WithLockOptions,
} from 'leasehold';

const options = { ttl: '30s', wait: '5s' };
const typedOptions: WithLockOptions = options;

export async function engineAndReason(): Promise<void> {
  const which: 'native' | 'wasm' = engine;
  const why: string | undefined = engineFallbackReason;
  const viaDefault: string | undefined = leasehold.engineFallbackReason;
  void [which, why, viaDefault, leasehold.withLock, leasehold.ResiliencePipelineBuilder];
}

// withLock(key, fn)
export async function keyAndFunction(): Promise<number> {
  return withLock('report', () => 42);
}

// withLock(key, fn, options), the context reaching fn
export async function keyFunctionOptions(): Promise<string> {
  const signalled: boolean = await withLock('report', ({ signal }) => signal.aborted, { ttl: '1m', wait: '5s' });
  void signalled;
  return withLock((context: ResilienceContext) => `account:${context.operationKey}`, async () => 'saved', {
    operationKey: '42',
    signal: new AbortController().signal,
  });
}

// withLock({ key, ...options }, fn): the README's form (TS2769 before)
export async function optionsFirst(): Promise<number> {
  // Options typed as WithLockOptions may skip (skipOnLockFailure: boolean): undefined is possible.
  const maybeSkipped: number | undefined = await withLock({ key: 'report', ...typedOptions }, async () => 7);
  void maybeSkipped;
  return withLock({ key: 'report', ...options }, async () => 7);
}

// withLock({ operationKey, ... }, fn): the operation key stands for the key
export async function operationKeyOnly(): Promise<string | undefined> {
  return withLock({ operationKey: 'op', wait: 0 }, ({ operationKey }) => operationKey);
}

// skipOnLockFailure: the result admits undefined, in both forms
export async function skipping(): Promise<void> {
  const skipped: number | undefined = await withLock('cleanup', () => 1, { skipOnLockFailure: true });
  const skippedToo: number | undefined = await withLock({ key: 'cleanup', skipOnLockFailure: true }, () => 1);
  const maybe = Math.random() > 0.5;
  const unknownSkip: number | undefined = await withLock('cleanup', () => 1, { skipOnLockFailure: maybe });
  const notSkipping: number = await withLock('cleanup', () => 1, { skipOnLockFailure: false });
  // @ts-expect-error a skipped call resolves undefined: the result is not just a number
  const wrong: number = await withLock('cleanup', () => 1, { skipOnLockFailure: true });
  // @ts-expect-error the same with the options first
  const wrongToo: number = await withLock({ key: 'cleanup', skipOnLockFailure: true }, () => 1);
  void [skipped, skippedToo, unknownSkip, notSkipping, wrong, wrongToo];
}

// @withLock(key, options) and @withLock({ key, ...options }) as method decorators
export class Jobs {
  runs = 0;

  @withLock('nightly-report', { ttl: '5m' })
  async report(day: string): Promise<number> {
    return (this.runs += day.length);
  }

  @withLock({ key: 'cleanup', wait: 0 })
  async cleanup(): Promise<void> {}

  @withLock('poll-queue', { skipOnLockFailure: true })
  async poll(): Promise<number | undefined> {
    return this.runs;
  }
}

export class SkippingNeedsUndefined {
  // @ts-expect-error with skipOnLockFailure the method's result must admit undefined
  @withLock('poll-queue', { skipOnLockFailure: true })
  async poll(): Promise<number> {
    return 1;
  }
}

export async function mistakes(): Promise<void> {
  // @ts-expect-error `timeout` is no option (`wait` is)
  await withLock('k', () => 1, { timeout: 5 });
  // @ts-expect-error withLock(options, fn) needs a key or an operationKey
  await withLock({ ttl: '1s' }, () => 1);
  // @ts-expect-error skipOnLockFailure is a boolean
  await withLock('k', () => 1, { skipOnLockFailure: 'yes' });
  // @ts-expect-error a key is a string or a function
  await withLock(42, () => 1);
}

// pipeline.execute / settle, acquireLock: the README's other forms
export async function pipelineAndLease(): Promise<void> {
  const pipeline = new ResiliencePipelineBuilder().addLock({ key: 'k', ttl: '30s', wait: '5s' }).build();
  const value: string = await pipeline.execute(({ signal }) => String(signal.aborted), { operationKey: 'o' });
  const outcome = await pipeline.settle(() => 1);
  if (!outcome.ok && isRejection(outcome.error)) {
    const rejected: LockNotAcquiredError = outcome.error;
    void rejected;
  }
  const lease = await acquireLock(new MemoryLockStore(), 'k', '10s', { wait: '1s', autoRenew: true });
  if (lease) await lease.release();
  void value;
}
