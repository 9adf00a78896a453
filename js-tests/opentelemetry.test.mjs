// Issue 29: OpenTelemetry metrics and spans, read back with the real SDK (in-memory
// reader and span exporter). A mixed run on fake time is observed by the test itself and
// compared with what the meter recorded. Runs once per engine.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { trace, context, SpanStatusCode } from '@opentelemetry/api';
import { registerOpenTelemetry, pointsOf } from './support/otel.mjs';
import { ResiliencePipelineBuilder, FakeTimeProvider, LockNotAcquiredError, LockStoreError, getLockToken } from './support/leasehold.mjs';
import { recordingStore } from './support/stores.mjs';
import { flush } from './support/time.mjs';
import { startRedisServer } from './support/redis.mjs';
import { connectIoredis, closeIoredis } from './support/redis-clients.mjs';
import { RedisLockStore } from 'leasehold/redis';

// Registered before any pipeline is built: a pipeline decides at its build.
const otel = registerOpenTelemetry();
const ACQUIRE_OUTCOMES = ['acquired', 'busy', 'timed_out', 'aborted', 'store_error'];

/** Fake time with timers for the test's own steps (callbacks ending, aborts, late answers). */
function scheduler(clock) {
  const timers = [];
  return {
    at(t, fn) {
      timers.push({ t, fn });
      timers.sort((a, b) => a.t - b.t);
    },
    sleep(ms) {
      return new Promise((resolve) => this.at(clock.now() + ms, resolve));
    },
    /** Moves time to `end`, stopping at every timer of the test and every 10 ms. */
    async runTo(end) {
      await flush(5);
      while (clock.now() < end) {
        const next = Math.min(end, clock.now() + 10, timers[0]?.t ?? Infinity);
        clock.advance(next - clock.now());
        while (timers.length > 0 && timers[0].t <= clock.now()) timers.shift().fn();
        await flush(5);
      }
    },
  };
}

/** What the test saw, per lock name: the same quantities the meter should hold. */
function observations() {
  const list = [];
  return {
    list,
    add(name, kind, label, ms) {
      list.push({ name, kind, label, ms });
    },
    of(name, kind, label) {
      return list.filter((o) => o.name === name && o.kind === kind && (label === undefined || o.label === label));
    },
  };
}

/** Starts `pipeline.execute` with a callback that holds for `holdMs`, recording what happens into `seen`. */
function observe({ pipeline, name, sched, clock, seen, lostAt }, { key, holdMs, wait, signal }) {
  const calledAt = clock.now();
  const rec = { startedAt: -1, lostAt: -1 };
  const done = pipeline.execute(
    async (ctx) => {
      rec.startedAt = clock.now();
      lostAt.set(ctx, rec);
      seen.add(name, 'wait', 'acquired', rec.startedAt - calledAt);
      await sched.sleep(holdMs);
      return clock.now();
    },
    { operationKey: key, signal },
  );
  return done.then(
    (endedAt) => {
      if (rec.lostAt >= 0) seen.add(name, 'hold', 'lost', rec.lostAt - rec.startedAt);
      else seen.add(name, 'hold', 'released', endedAt - rec.startedAt);
    },
    (error) => {
      const waited = clock.now() - calledAt;
      if (rec.startedAt >= 0) {
        // Lost, and the callback failed: the hold ended at the loss.
        seen.add(name, 'hold', 'lost', rec.lostAt - rec.startedAt);
      } else if (error instanceof LockNotAcquiredError) seen.add(name, 'wait', wait === 0 ? 'busy' : 'timed_out', waited);
      else if (error instanceof LockStoreError) seen.add(name, 'wait', 'store_error', waited);
      else if (error?.name === 'AbortError') seen.add(name, 'wait', 'aborted', waited);
      else throw error;
    },
  );
}

/** Asserts that the meter holds for lock `name` exactly what `seen` observed. */
async function assertRecorded(name, seen) {
  const m = await otel.metrics();
  const of = (metric, extra = {}) => pointsOf(m.get(metric), { 'leasehold.lock.name': name, ...extra });
  const sum = (list) => list.reduce((s, o) => s + o.ms, 0) / 1000;
  const histogram = (metric, label, attr, list) => {
    const points = of(metric, { [attr]: label });
    const count = points.reduce((s, p) => s + p.value.count, 0);
    assert.equal(count, list.length, `${metric} ${label}: count`);
    if (list.length === 0) return;
    const recorded = points.reduce((s, p) => s + p.value.sum, 0);
    assert.ok(Math.abs(recorded - sum(list)) < 0.001, `${metric} ${label}: sum ${recorded} s, observed ${sum(list)} s`);
    assert.ok(Math.abs(Math.max(...points.map((p) => p.value.max)) - Math.max(...list.map((o) => o.ms)) / 1000) < 0.001);
  };
  for (const outcome of ACQUIRE_OUTCOMES) {
    const waits = seen.of(name, 'wait', outcome);
    const counted = of('leasehold.lock.acquisitions', { 'leasehold.lock.outcome': outcome }).reduce((s, p) => s + p.value, 0);
    assert.equal(counted, waits.length, `acquisitions ${outcome}`);
    histogram('leasehold.lock.wait.duration', outcome, 'leasehold.lock.outcome', waits);
  }
  for (const end of ['released', 'lost']) {
    histogram('leasehold.lock.hold.duration', end, 'leasehold.lease.end', seen.of(name, 'hold', end));
  }
  for (const outcome of ['renewed', 'failed', 'refused']) {
    const counted = of('leasehold.lease.renewals', { 'leasehold.renewal.outcome': outcome }).reduce((s, p) => s + p.value, 0);
    assert.equal(counted, seen.of(name, 'renewal', outcome).length, `renewals ${outcome}`);
  }
  const lags = seen.of(name, 'renewal', 'renewed');
  const lagPoints = of('leasehold.lease.renewal.lag');
  assert.equal(lagPoints.reduce((s, p) => s + p.value.count, 0), lags.length, 'renewal lag count');
  if (lags.length > 0) assert.ok(Math.abs(lagPoints.reduce((s, p) => s + p.value.sum, 0) - sum(lags)) < 0.001, 'renewal lag sum');
  for (const reason of ['refused', 'expired']) {
    const counted = of('leasehold.lease.losses', { 'leasehold.loss.reason': reason }).reduce((s, p) => s + p.value, 0);
    assert.equal(counted, seen.of(name, 'loss', reason).length, `losses ${reason}`);
  }
  assert.equal(
    of('leasehold.lease.count').reduce((s, p) => s + p.value, 0),
    0,
    'no lease counted as held once every execution settled',
  );
}

describe('OpenTelemetry metrics', () => {
  test('instruments carry the documented names and units', async () => {
    const clock = new FakeTimeProvider();
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'units', name: 'units' }).build();
    await pipeline.execute(() => undefined);
    const m = await otel.metrics();
    assert.equal(m.get('leasehold.lock.wait.duration').unit, 's');
    assert.equal(m.get('leasehold.lock.hold.duration').unit, 's');
    assert.equal(m.get('leasehold.lock.acquisitions').unit, '{acquisition}');
    assert.equal(m.get('leasehold.lease.count').unit, '{lease}');
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    assert.deepEqual([m.get('leasehold.lock.acquisitions').scope.name, m.get('leasehold.lock.acquisitions').scope.version], ['leasehold', version]);
    const [point] = pointsOf(m.get('leasehold.lock.acquisitions'), { 'leasehold.lock.name': 'units' });
    assert.deepEqual(point.attributes, {
      'leasehold.store.kind': 'memory',
      'leasehold.lock.name': 'units',
      'leasehold.lock.mode': 'exclusive',
      'leasehold.lock.outcome': 'acquired',
    });
  });

  test('a mixed run of 10 s (fake time) on the memory store records exactly what the test observed', async () => {
    const clock = new FakeTimeProvider();
    const sched = scheduler(clock);
    const seen = observations();
    const lostAt = new WeakMap();
    const name = 'mixed-memory';
    const build = (wait) => new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ ttl: 3000, wait, name }).build();
    const [failFast, patient] = [build(0), build(100)];
    let seed = 29;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const runs = [];
    for (let step = 0; step < 1000; step++) {
      if (random() < 0.4) {
        const wait = random() < 0.5 ? 0 : 100;
        const controller = random() < 0.15 ? new AbortController() : undefined;
        // Aborts fall between the 10 ms steps at which grants and callbacks' ends happen.
        if (controller) sched.at(clock.now() + 55, () => controller.abort());
        const ctx = { pipeline: wait === 0 ? failFast : patient, name, sched, clock, seen, lostAt };
        runs.push(observe(ctx, { key: `k${Math.floor(random() * 3)}`, holdMs: 10 * (1 + Math.floor(random() * 30)), wait, signal: controller?.signal }));
      }
      await sched.runTo(clock.now() + 10);
    }
    await sched.runTo(clock.now() + 1000);
    await Promise.all(runs);
    for (const outcome of ['acquired', 'busy', 'timed_out', 'aborted']) {
      assert.ok(seen.of(name, 'wait', outcome).length > 0, `the run saw some ${outcome}`);
    }
    await assertRecorded(name, seen);
  });

  test('renewals, their lag, losses and store errors on a JS store match what the store saw', async () => {
    const clock = new FakeTimeProvider();
    const sched = scheduler(clock);
    const seen = observations();
    const lostAt = new WeakMap();
    const name = 'mixed-js';
    // What each key's renewals do, in turn: answer after `delay` ms, throw, refuse, or never answer.
    const plans = { x: [{ delay: 40 }, 'throw', { delay: 0 }], y: ['refuse'], z: ['hang'] };
    const lastSet = new Map(); // owner -> when its lease was last set (acquire or renewal sent)
    let failAcquire = false;
    const store = recordingStore(clock, {
      async acquire(key, owner, ttl) {
        if (failAcquire) throw new Error('store down');
        const sentAt = clock.now();
        const answer = await store.base.acquire(key, owner, ttl);
        if (answer) lastSet.set(owner, sentAt);
        return answer;
      },
      async renew(key, owner, ttl) {
        const sentAt = clock.now();
        const plan = plans[key].shift() ?? { delay: 0 };
        const due = lastSet.get(owner) + 1000;
        if (plan === 'hang') return new Promise(() => {});
        if (plan === 'throw') {
          seen.add(name, 'renewal', 'failed', 0);
          throw new Error('renew failed');
        }
        if (plan === 'refuse') {
          seen.add(name, 'renewal', 'refused', 0);
          return false;
        }
        const ok = await store.base.renew(key, owner, ttl);
        await sched.sleep(plan.delay);
        lastSet.set(owner, sentAt);
        seen.add(name, 'renewal', 'renewed', clock.now() - due);
        return ok;
      },
    });
    const onLockLost = ({ context: ctx }) => {
      const rec = lostAt.get(ctx);
      rec.lostAt = clock.now();
      seen.add(name, 'loss', ctx.operationKey === 'y' ? 'refused' : 'expired', 0);
    };
    const build = (wait) => new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ store, ttl: 3000, wait, name, onLockLost }).build();
    const pipeline = build(0);
    const ctx = { pipeline, name, sched, clock, seen, lostAt };
    const runs = [
      observe(ctx, { key: 'x', holdMs: 2500, wait: 0 }),
      observe(ctx, { key: 'y', holdMs: 1500, wait: 0 }),
      observe(ctx, { key: 'z', holdMs: 3500, wait: 0 }),
    ];
    await sched.runTo(clock.now() + 100);
    runs.push(observe(ctx, { key: 'x', holdMs: 10, wait: 0 }));
    await sched.runTo(clock.now() + 100);
    // Held now: x, y and z.
    const during = await otel.metrics();
    assert.equal(pointsOf(during.get('leasehold.lease.count'), { 'leasehold.lock.name': name })[0].value, 3);
    failAcquire = true;
    runs.push(observe(ctx, { key: 'w', holdMs: 10, wait: 0 }));
    await sched.runTo(clock.now() + 10);
    failAcquire = false;
    await sched.runTo(clock.now() + 4000);
    await Promise.all(runs);
    assert.deepEqual(
      ['renewed', 'failed', 'refused'].map((o) => seen.of(name, 'renewal', o).length),
      [2, 1, 1],
      'the store saw two renewals, one failure and one refusal',
    );
    assert.deepEqual(seen.of(name, 'renewal', 'renewed').map((o) => o.ms), [40, 50]);
    assert.equal(seen.of(name, 'hold', 'lost').length, 2);
    assert.equal(seen.of(name, 'wait', 'store_error').length, 1);
    assert.equal(seen.of(name, 'wait', 'busy').length, 1);
    await assertRecorded(name, seen);
  });

  test('the key is an attribute only when the builder opts it in', async () => {
    const clock = new FakeTimeProvider();
    const named = new ResiliencePipelineBuilder({ timeProvider: clock, openTelemetry: { key: true } })
      .addLock({ name: 'keyed', key: (c) => `user:${c.operationKey}` })
      .build();
    await named.execute(() => undefined, { operationKey: '1' });
    await named.execute(() => undefined, { operationKey: '2' });
    const plain = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ name: 'unkeyed', key: 'user:3' }).build();
    await plain.execute(() => undefined);
    const m = await otel.metrics();
    const keyed = pointsOf(m.get('leasehold.lock.acquisitions'), { 'leasehold.lock.name': 'keyed' });
    assert.deepEqual(keyed.map((p) => p.attributes['leasehold.lock.key']).sort(), ['user:1', 'user:2']);
    const unkeyed = pointsOf(m.get('leasehold.lock.acquisitions'), { 'leasehold.lock.name': 'unkeyed' });
    assert.equal(unkeyed.length, 1);
    assert.equal('leasehold.lock.key' in unkeyed[0].attributes, false);
    assert.throws(() => new ResiliencePipelineBuilder({ openTelemetry: { keys: true } }), /openTelemetry has no option 'keys'/);
    assert.throws(() => new ResiliencePipelineBuilder({ openTelemetry: true }), /openTelemetry must be false or an object/);
  });

  test('openTelemetry: false records nothing and keeps the fast path', async () => {
    const clock = new FakeTimeProvider();
    const off = new ResiliencePipelineBuilder({ timeProvider: clock, openTelemetry: false }).addLock({ name: 'off', key: 'off' }).build();
    await off.execute(() => undefined);
    assert.equal(off.fastLock, true);
    assert.equal(pointsOf((await otel.metrics()).get('leasehold.lock.acquisitions'), { 'leasehold.lock.name': 'off' }).length, 0);
  });
});

describe('OpenTelemetry on a real store', () => {
  test('a Redis lock is recorded under store kind redis, its wait and hold on the real clock', async (t) => {
    const server = await startRedisServer();
    t.after(() => server.stop());
    const client = await connectIoredis(server.port);
    const store = new RedisLockStore({ client });
    t.after(async () => {
      await store.close();
      await closeIoredis(client);
    });
    const pipeline = new ResiliencePipelineBuilder().addLock({ store, key: 'otel:redis', name: 'on-redis', ttl: '10s', wait: '5s' }).build();
    const started = performance.now();
    let heldMs = 0;
    const first = pipeline.execute(async () => {
      const t0 = performance.now();
      await new Promise((resolve) => setTimeout(resolve, 30));
      heldMs = performance.now() - t0;
    });
    const second = pipeline.execute(() => undefined);
    await Promise.all([first, second]);
    const elapsed = (performance.now() - started) / 1000;
    const m = await otel.metrics();
    const acquired = pointsOf(m.get('leasehold.lock.acquisitions'), { 'leasehold.lock.name': 'on-redis' });
    assert.equal(acquired.length, 1);
    assert.equal(acquired[0].attributes['leasehold.store.kind'], 'redis');
    assert.equal(acquired[0].value, 2);
    const [hold] = pointsOf(m.get('leasehold.lock.hold.duration'), { 'leasehold.lock.name': 'on-redis' });
    assert.equal(hold.value.count, 2);
    // The first hold spans its callback (and the release's round trip); bounds that only catch nonsense.
    assert.ok(hold.value.max >= heldMs / 1000 - 0.002 && hold.value.max <= elapsed, `${hold.value.max} s held, callback ${heldMs} ms`);
    const [wait] = pointsOf(m.get('leasehold.lock.wait.duration'), { 'leasehold.lock.name': 'on-redis' });
    assert.equal(wait.value.count, 2);
    assert.ok(wait.value.max >= 0.02 && wait.value.max <= elapsed, `the second waited ${wait.value.max} s`);
  });
});

describe('OpenTelemetry spans', () => {
  test("a lock's span is a child of the caller's active span, with its fencing token", async () => {
    otel.spans.reset();
    const clock = new FakeTimeProvider();
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'traced', name: 'report' }).build();
    const tracer = trace.getTracer('test');
    let token;
    const caller = tracer.startSpan('handle request');
    await context.with(trace.setSpan(context.active(), caller), () =>
      pipeline.execute(() => {
        token = getLockToken();
      }),
    );
    caller.end();
    const busy = new ResiliencePipelineBuilder({ timeProvider: clock }).addLock({ key: 'traced', name: 'report' }).build();
    const held = pipeline.execute(() => busy.settle(() => undefined));
    assert.equal((await held).ok, false);
    const spans = otel.spans.getFinishedSpans().filter((s) => s.name === 'lock report');
    assert.equal(spans.length, 3);
    const [first, inner] = spans;
    const parent = first.parentSpanContext ?? first.parentSpanId;
    assert.equal(first.spanContext().traceId, caller.spanContext().traceId);
    assert.equal(typeof parent === 'string' ? parent : parent.spanId, caller.spanContext().spanId);
    assert.equal(first.attributes['leasehold.lock.fencing_token'], token);
    assert.equal(first.attributes['leasehold.lease.end'], 'released');
    assert.deepEqual(first.events.map((e) => e.name), ['acquired']);
    assert.equal(first.status.code, SpanStatusCode.UNSET);
    // Tried inside the holder's callback: busy, an error span.
    assert.equal(inner.attributes['leasehold.lock.outcome'], 'busy');
    assert.equal(inner.status.code, SpanStatusCode.ERROR);
  });
});

describe('OpenTelemetry spans of nested locks', () => {
  test("an inner lock's span is a child of the outer one's; each has its own token", async () => {
    otel.spans.reset();
    const clock = new FakeTimeProvider();
    const pipeline = new ResiliencePipelineBuilder({ timeProvider: clock })
      .addLock({ key: 'outer', name: 'outer' })
      .addLock({ key: 'inner', name: 'inner' })
      .build();
    const token = await pipeline.execute(() => getLockToken());
    const spans = otel.spans.getFinishedSpans();
    const outer = spans.find((s) => s.name === 'lock outer');
    const inner = spans.find((s) => s.name === 'lock inner');
    const parentOf = (span) => {
      const parent = span.parentSpanContext ?? span.parentSpanId;
      return typeof parent === 'string' ? parent : parent?.spanId;
    };
    assert.equal(parentOf(inner), outer.spanContext().spanId);
    assert.equal(inner.attributes['leasehold.lock.fencing_token'], token);
    assert.ok(outer.attributes['leasehold.lock.fencing_token'] < token);
  });
});

describe('without @opentelemetry/api', () => {
  const child = fileURLToPath(new URL('./support/otel-blocked-child.cjs', import.meta.url));
  const run = (mode) => {
    const out = spawnSync(process.execPath, [child, mode], { encoding: 'utf8', env: process.env, timeout: 30_000 });
    assert.equal(out.status, 0, out.stderr);
    return JSON.parse(out.stdout);
  };

  test('nothing of OpenTelemetry loads, the API is looked for once, and the fast path stays', () => {
    const report = run('blocked');
    assert.deepEqual(report.loaded, []);
    assert.equal(report.lookups, 1, 'looked for once, at the first build');
    assert.equal(report.fastLock, true);
    assert.equal(report.value, 'done');
  });

  test('with the API installed but no provider registered, nothing is recorded and the fast path stays', () => {
    const report = run('unregistered');
    assert.equal(report.fastLock, true);
    assert.equal(report.value, 'done');
  });
});
