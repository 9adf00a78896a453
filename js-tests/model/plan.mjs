// The contract model's plans: fast-check arbitraries for one run (a clock, a store, a
// list of steps), and how a plan prints. world.mjs carries a plan out.

import fc from 'fast-check';

export const WAYS = ['fixed', 'opkey', 'fn', 'withLock', 'acquire', 'nested', 'twoLock'];
export const STORES = ['memory', 'poll', 'announce', 'grants', 'handoff'];
export const WORKS = ['sync', 'ms', 'never', 'throw', 'block'];
export const KEYS = ['a', 'b', 'c'];

const wait = fc.oneof(
  { weight: 2, arbitrary: fc.constant(0) },
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 400 }) },
  { weight: 3, arbitrary: fc.constant(Infinity) },
);

/** One request: a way in, its key, lease, wait, callback and abort. */
const go = (clock) =>
  fc.record({
    t: fc.constant('go'),
    way: fc.constantFrom(...WAYS),
    key: fc.integer({ min: 0, max: KEYS.length - 1 }),
    ttl: clock === 'fake' ? fc.integer({ min: 2, max: 300 }) : fc.integer({ min: 40, max: 200 }),
    wait,
    work: fc.constantFrom(...WORKS),
    ms: fc.integer({ min: 0, max: clock === 'fake' ? 120 : 25 }),
    abortBefore: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
    telemetry: fc.boolean(),
    autoRenew: fc.boolean(),
    linger: fc.constantFrom(0, 0, 5),
    // Permits (limit, weight, mode) go here once they exist: checks.mjs reads them.
    permit: fc.constant(undefined),
  });

const step = (clock) =>
  fc.oneof(
    { weight: 5, arbitrary: go(clock) },
    { weight: 4, arbitrary: fc.record({ t: fc.constant('time'), ms: fc.integer({ min: 0, max: clock === 'fake' ? 200 : 30 }) }) },
    { weight: 2, arbitrary: fc.record({ t: fc.constant('abort'), nth: fc.nat() }) },
    {
      weight: 2,
      arbitrary: fc.record({
        t: fc.constant('lease'),
        nth: fc.nat(),
        action: fc.constantFrom('release', 'release', 'extend', 'double'),
        ttl: fc.option(fc.integer({ min: 5, max: 300 }), { nil: undefined }),
      }),
    },
    { weight: 1, arbitrary: fc.record({ t: fc.constant('settle'), nth: fc.nat() }) },
  );

/** A whole run on `clock` ('fake' or 'real'). */
export function planOf(clock, { maxSteps = 40 } = {}) {
  return fc.record({
    clock: fc.constant(clock),
    store: fc.constantFrom(...STORES),
    steps: fc.array(step(clock), { minLength: 1, maxLength: maxSteps }),
  });
}

/** A plan as lines a person can read (and paste back into a test). */
export function describePlan(plan) {
  const lines = [`clock ${plan.clock}, store ${plan.store}`];
  plan.steps.forEach((s, i) => {
    const { t, ...rest } = s;
    const fields = Object.entries(rest)
      .filter(([, v]) => v !== undefined && v !== false)
      .map(([k, v]) => `${k}=${k === 'key' ? KEYS[v] : String(v)}`);
    lines.push(`  ${i}: ${t} ${fields.join(' ')}`);
  });
  return lines.join('\n');
}
