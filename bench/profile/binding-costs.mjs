// Diagnosis: what each call into the engine costs, per engine, on the memory store,
// measured on the binding itself (no host, no promises). The calls are the ones
// lib/host.cjs makes per execution:
//   uncontended: start (granted at once) + finish (settled at once)
//   handoff:     finish of the holder (wakes the next waiter) + takeEffects() returning
//                the waiter's `run` effect + takeEffects() returning [] + token(next)
//                + start of a new waiter (queued)
//
//   node bench/profile/binding-costs.mjs [iterations=200000]

import { createRequire } from 'node:module';
import { median } from '../support/stats.mjs';

const require = createRequire(import.meta.url);
const N = Number(process.argv[2] ?? 200_000);
const MEMORY = 0;
const RENEW = 1;
const FOREVER = -1;

function measure(binding) {
  const seed = new Uint8Array(32);
  const engine = new binding.Engine(false, 0, seed);
  const store = engine.createMemoryStore();
  const t = { start: 0, finish: 0, startQueued: 0, finishHandoff: 0, takeOne: 0, takeEmpty: 0, token: 0 };
  let id = 1;
  // Uncontended: start + finish.
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    engine.start(id, RENEW, MEMORY, store, 'bench:key', 30_000, 0);
    const b = performance.now();
    engine.finish(id, true);
    const c = performance.now();
    t.start += b - a;
    t.finish += c - b;
    while (engine.takeEffects().length) {}
    id += 1;
  }
  // Handoff: one holder, one waiter, repeated.
  let holder = id++;
  engine.start(holder, RENEW, MEMORY, store, 'bench:handoff', 30_000, FOREVER);
  let waiter = id++;
  engine.start(waiter, RENEW, MEMORY, store, 'bench:handoff', 30_000, FOREVER);
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    engine.finish(holder, true);
    const b = performance.now();
    const effects = engine.takeEffects();
    const c = performance.now();
    const empty = engine.takeEffects();
    const d = performance.now();
    engine.token(waiter);
    const e = performance.now();
    if (effects.length !== 1 || effects[0].kind !== 'run' || empty.length !== 0) {
      throw new Error(`unexpected effects ${JSON.stringify(effects)} ${JSON.stringify(empty)}`);
    }
    holder = waiter;
    waiter = id++;
    const f = performance.now();
    engine.start(waiter, RENEW, MEMORY, store, 'bench:handoff', 30_000, FOREVER);
    const g = performance.now();
    t.finishHandoff += b - a;
    t.takeOne += c - b;
    t.takeEmpty += d - c;
    t.token += e - d;
    t.startQueued += g - f;
  }
  // An execution on a JS store (the Redis path): every call and every takeEffects the
  // host makes, with what each takeEffects returns.
  const js = { kind: 1, store: 1 };
  const x = {
    startJs: 0, takeCallAcquire: 0, answerAcquire: 0, takeRun: 0, finishJs: 0, takeCallRelease: 0,
    answerRelease: 0, takeSettled: 0, takeEmptyJs: 0,
  };
  const kinds = (fx) => fx.map((f) => (f.kind === 'call' ? `call ${f.method}` : f.kind)).join(',');
  const expect = (fx, what) => {
    if (kinds(fx) !== what) throw new Error(`expected [${what}], got [${kinds(fx)}]`);
    return fx;
  };
  for (let i = 0; i < N; i++) {
    const exec = id++;
    let a = performance.now();
    engine.start(exec, RENEW, js.kind, js.store, 'bench:js', 30_000, 0);
    let b = performance.now();
    const [acq] = expect(engine.takeEffects(), 'call acquire');
    let c = performance.now();
    engine.takeEffects();
    let d = performance.now();
    x.startJs += b - a;
    x.takeCallAcquire += c - b;
    x.takeEmptyJs += d - c;
    a = performance.now();
    engine.answerAcquire(acq.request, i + 1);
    b = performance.now();
    expect(engine.takeEffects(), 'run');
    c = performance.now();
    x.answerAcquire += b - a;
    x.takeRun += c - b;
    a = performance.now();
    engine.finish(exec, true);
    b = performance.now();
    const [rel] = expect(engine.takeEffects(), 'call release');
    c = performance.now();
    x.finishJs += b - a;
    x.takeCallRelease += c - b;
    a = performance.now();
    engine.answerRelease(rel.request, true);
    b = performance.now();
    expect(engine.takeEffects(), 'settled');
    c = performance.now();
    x.answerRelease += b - a;
    x.takeSettled += c - b;
  }
  Object.assign(t, x);
  // The floor of a call: no argument, a number back.
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    engine.armAt();
    const b = performance.now();
    t.armAt = (t.armAt ?? 0) + (b - a);
  }
  // The cost of the timestamps themselves, to subtract.
  let clock = 0;
  for (let i = 0; i < N; i++) {
    const a = performance.now();
    const b = performance.now();
    clock += b - a;
  }
  const us = (x) => ((x - clock) / N) * 1000;
  return Object.fromEntries(Object.entries(t).map(([k, v]) => [k, us(v)]));
}

const engines = {
  native: () => require('../../lib/native.cjs').load(),
  wasm: () => require('../../lib/wasm-node.cjs').load(),
};
const rounds = 3;
const results = { native: [], wasm: [] };
for (let r = 0; r < rounds; r++) for (const [name, load] of Object.entries(engines)) results[name].push(measure(load()));
console.log(`µs per call (median of ${rounds} rounds of ${N}, timestamp cost subtracted)`);
const keys = Object.keys(results.native[0]).filter((k) => !k.startsWith('armAt'));
keys.unshift('armAt');
console.log(`${'call'.padEnd(34)} ${'native'.padStart(8)} ${'wasm'.padStart(8)}`);
const names = {
  armAt: 'armAt() (a call, no argument)',
  start: 'start (granted at once)',
  finish: 'finish (settled at once)',
  finishHandoff: 'finish (wakes the next waiter)',
  takeOne: 'takeEffects() -> [run]',
  takeEmpty: 'takeEffects() -> []',
  token: 'token(exec)',
  startQueued: 'start (queued behind a holder)',
  startJs: 'JS store: start',
  takeCallAcquire: '  takeEffects() -> [call acquire]',
  takeEmptyJs: '  takeEffects() -> []',
  answerAcquire: '  answerAcquire',
  takeRun: '  takeEffects() -> [run]',
  finishJs: '  finish',
  takeCallRelease: '  takeEffects() -> [call release]',
  answerRelease: '  answerRelease',
  takeSettled: '  takeEffects() -> [settled]',
};
const jsKeys = ['startJs', 'takeCallAcquire', 'takeEmptyJs', 'answerAcquire', 'takeRun', 'finishJs', 'takeCallRelease', 'answerRelease', 'takeSettled'];
for (const k of keys) {
  const m = (e) => median(results[e].map((x) => x[k])).toFixed(2);
  console.log(`${names[k].padEnd(34)} ${m('native').padStart(8)} ${m('wasm').padStart(8)}`);
}
const sum = (e) => jsKeys.reduce((n, k) => n + median(results[e].map((x) => x[k])), 0).toFixed(2);
console.log(`${'JS store: all calls of one execution'.padEnd(34)} ${sum('native').padStart(8)} ${sum('wasm').padStart(8)}`);
