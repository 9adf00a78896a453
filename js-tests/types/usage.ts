// Type test: every export used the way the README shows. `tsc -p js-tests/types` must pass;
// each @ts-expect-error proves the declarations reject a mistake.
import leasehold, {
  engine,
  init,
  LOCK_TOKEN,
  ResiliencePipelineBuilder,
  MemoryLockStore,
  FakeTimeProvider,
  LockNotAcquiredError,
  LockLostError,
  LockStoreError,
  isRejection,
  getLockToken,
  type LockStore,
  type ResilienceContext,
  type TelemetryEvent,
  type Outcome,
  type LeaseHandle,
  acquireLock,
  withLock,
} from 'leasehold';

class NightlyJob {
  runs = 0;
  @withLock('nightly-report', { ttl: '5m' })
  async run(day: string): Promise<number> {
    this.runs += day.length;
    return this.runs;
  }
}

const which: 'native' | 'wasm' = engine;
const clock = new FakeTimeProvider(1_000);
clock.advance(5);
const now: number = clock.now();

const events: TelemetryEvent[] = [];
const custom: LockStore = {
  async acquire(_key, _owner, _ttlMs) {
    return { fencingToken: 1 };
  },
  async renew() {
    return true;
  },
  async release() {},
};

const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock, telemetry: (e) => events.push(e) })
  .addLock({ key: 'outer', ttl: '30s', wait: 250, store: new MemoryLockStore({ timeProvider: clock }) })
  .addLock({
    key: (ctx: ResilienceContext) => `order:${ctx.operationKey}`,
    store: custom,
    onLockLost: ({ key, context }) => {
      if (context.signal.aborted) events.length = key.length;
    },
    name: 'orders',
  })
  .build();

async function main(): Promise<void> {
  const n: number = await pipeline.execute(async ({ signal, properties }) => {
    signal.throwIfAborted();
    const token: number | undefined = getLockToken();
    const same = properties.get(LOCK_TOKEN);
    return (token ?? 0) + Number(same ?? 0);
  }, { operationKey: '42', signal: new AbortController().signal });

  const outcome: Outcome<string> = await pipeline.settle(() => 'x');
  if (outcome.ok) {
    const s: string = outcome.value;
    void s;
  } else if (isRejection(outcome.error)) {
    const e: LockNotAcquiredError = outcome.error;
    const status: 409 = e.httpStatus;
    void status;
  }
  for (const event of events) {
    if (event.type === 'acquired') {
      const waited: number = event.waitedMs;
      void waited;
    }
  }
  const err: unknown = new Error();
  if (err instanceof LockLostError) {
    const code: 'LOCK_LOST' = err.code;
    void code;
  }
  if (err instanceof LockStoreError) {
    const method: 'acquire' | 'renew' | 'release' = err.method;
    void method;
  }
  // A custom store or a test double throws the same classes.
  const thrown: Error[] = [
    new LockNotAcquiredError('k'),
    new LockLostError('k', 'lost in a test', { cause: err }),
    new LockStoreError('k', 'acquire', 'the store failed', { cause: err }),
  ];
  void thrown;
  const store = new MemoryLockStore();
  const size: number = store.size;
  const released: boolean = await store.release('k', 'o');
  const left: number | undefined = await store.ttl('k');
  void [n, size, released, left, which, now, leasehold.engine];

  const lease: LeaseHandle | undefined = await acquireLock(store, 'k', '30s', { wait: 100, autoRenew: true });
  if (lease) {
    const token: number = lease.fencingToken;
    const extended: boolean = await lease.extend('1m');
    const ok: boolean = await lease.release();
    void [token, extended, ok, lease.signal.aborted];
  }
  const viaHelper: string = await withLock('k', () => 'v', { wait: '1s' });
  const total: number = await new NightlyJob().run('monday');
  void [viaHelper, total];
  // ambientToken: false: the token comes from the context.
  const passed = new ResiliencePipelineBuilder({ ambientToken: false }).addLock({ key: 'k' }).build();
  const fromContext: number | undefined = await passed.execute((context) => getLockToken(context));
  const viaPassed: number | undefined = await withLock('k', (context) => getLockToken(context), { ambientToken: false });
  void [fromContext, viaPassed];
  // @ts-expect-error ambientToken is a boolean
  new ResiliencePipelineBuilder({ ambientToken: 'off' });
  // OpenTelemetry: off, or the key as an attribute.
  new ResiliencePipelineBuilder({ openTelemetry: false }).addLock({ key: 'k', name: 'job' }).build();
  await withLock('k', () => 'v', { openTelemetry: { key: true } });
  // @ts-expect-error openTelemetry is false or { key }
  new ResiliencePipelineBuilder({ openTelemetry: true });
  // @ts-expect-error acquireLock needs a ttl
  await acquireLock(store, 'k');

  // @ts-expect-error ttl is a duration, not a boolean
  new ResiliencePipelineBuilder().addLock({ key: 'k', ttl: true });
  // @ts-expect-error a store needs acquire, renew and release
  new ResiliencePipelineBuilder().addLock({ key: 'k', store: { acquire: async () => undefined } });
  // @ts-expect-error the callback's value type flows through
  const wrong: string = await pipeline.execute(() => 5);
  void wrong;
  // @ts-expect-error pipelines come from the builder
  new ResiliencePipeline();
}
void main;
import { ResiliencePipeline } from 'leasehold';

// init(): once, from the package's file or from where the app says.
async function loadEngine(bytes: Uint8Array): Promise<void> {
  await init();
  await init({ wasm: new URL('https://example.com/leasehold.wasm') });
  await init({ wasm: '/assets/leasehold.wasm' });
  await init({ wasm: bytes });
  await leasehold.init({ wasm: fetch('/assets/leasehold.wasm') });
  // @ts-expect-error init has one option, wasm
  await init({ module: bytes });
}
void loadEngine;
