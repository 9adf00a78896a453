// lib/host/protocol.cjs decodes what the engine returns; core/tests/protocol.rs holds its
// constants to the Rust ones. These tests hold its decoders to what this engine
// really answers: each status word and effect is read only through them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import leasehold from 'leasehold';

const require = createRequire(import.meta.url);
const P = require('../lib/host/protocol.cjs');
const { binding } = leasehold[Symbol.for('leasehold.internals')];
const engineName = leasehold.engine;

function newEngine() {
  return new binding.Engine(false, 0, new Uint8Array(32));
}

/** The effects waiting in `engine`, decoded: [kind, ...what decodeEffect passed]. */
function effects(engine) {
  const numbers = engine.takeEffects();
  const strings = P.stringCount(numbers) > 0 ? engine.takeStrings() : [];
  const out = [];
  const sink = {
    callEffect: (call, layer) => out.push(['call', call, layer]),
    runEffect: (exec, token) => out.push(['run', exec, token]),
    lostEffect: (exec, layer) => out.push(['lost', exec, layer]),
    settledEffect: (exec, settled) => out.push(['settled', exec, settled]),
    extendedEffect: (exec, ok) => out.push(['extended', exec, ok]),
    watchEffect: (watch) => out.push(['watch', watch]),
    eventEffect: (exec, event) => out.push(['event', exec, event]),
  };
  for (let i = P.EFFECT_FIRST; i < numbers.length; i += P.EFFECT_WIDTH) P.decodeEffect(numbers, i, strings, sink);
  return out;
}

/** The call's result in status word `word`, after taking any effects it announces. */
function result(engine, word) {
  const status = P.statusOf(word);
  if (status & P.STATUS_EFFECTS) effects(engine);
  return P.resultOf(status);
}

test(`start runs at once under the token in the payload; finish hands off to the waiter by id (${engineName})`, () => {
  const engine = newEngine();
  const store = engine.createMemoryStore();
  const lock = engine.defineLock(P.STORE_MEMORY, store, 'protocol:handoff', 30_000, -1, '', 1, 1);
  const started = engine.startDefined(1, P.OPTION_RENEW, lock);
  assert.equal(result(engine, started), P.STARTED_RUNNING);
  const first = P.payloadOf(started);
  assert.equal(first, engine.token(1));
  assert.equal(result(engine, engine.startDefined(2, P.OPTION_RENEW, lock)), 0, 'the second execution waits');

  const finished = engine.finish(1, true, true);
  const status = P.statusOf(finished);
  assert.equal(P.finishSettlement(status), P.FINISHED_VALUE);
  assert.ok(P.finishHandsOff(status), 'the waiter is handed the lock in the status word');
  assert.equal(P.payloadOf(finished), 2);
  assert.ok(engine.token(2) > first, 'the next holder has a larger token');

  const last = engine.finish(2, false, true);
  assert.equal(P.finishSettlement(P.statusOf(last)), P.FINISHED_CALLBACK_ERROR);
  assert.ok(!P.finishHandsOff(P.statusOf(last)));
  assert.equal(P.payloadOf(last), 0);
});

test(`without a handoff the waiter's run is an effect carrying its token (${engineName})`, () => {
  const engine = newEngine();
  const store = engine.createMemoryStore();
  const lock = engine.defineLock(P.STORE_MEMORY, store, 'protocol:run', 30_000, -1, '', 1, 1);
  assert.equal(result(engine, engine.startDefined(1, P.OPTION_RENEW, lock)), P.STARTED_RUNNING);
  assert.equal(result(engine, engine.startDefined(2, P.OPTION_RENEW, lock)), 0);
  const finished = engine.finish(1, true, false);
  assert.equal(P.finishSettlement(P.statusOf(finished)), P.FINISHED_VALUE);
  assert.ok(P.statusOf(finished) & P.STATUS_EFFECTS, 'effects wait');
  assert.deepEqual(effects(engine), [['run', 2, engine.token(2)]]);
});

test(`a JS store's calls come back in status words, and its answers run and settle there (${engineName})`, () => {
  const engine = newEngine();
  const lock = engine.defineLock(P.STORE_POLLED, 1, 'protocol:js', 30_000, 0, '', 1, 1);
  const started = engine.startDefined(3, P.OPTION_RENEW | P.OPTION_DIRECT, lock);
  assert.equal(result(engine, started), P.STARTED_STORE_CALL);
  const acquire = P.payloadOf(started);
  assert.ok(acquire > 0, 'the payload is the request id');

  assert.equal(result(engine, engine.answerAcquire(acquire, 7, true)), P.ANSWERED_RUNNING);
  assert.equal(engine.token(3), 7);

  const finished = engine.finish(3, true, true);
  assert.ok(P.finishCallsStore(P.statusOf(finished)), 'the release is handed back');
  const release = P.payloadOf(finished);
  assert.ok(release > 0 && release !== acquire);
  const answered = result(engine, engine.answerRelease(release, true, true));
  assert.equal(answered, P.ANSWERED_VALUE);
  assert.deepEqual(P.settledByAnswer(answered), { outcome: 'value' });
});

test(`as effects, a store call names its key and owner, and a store's failure its error (${engineName})`, () => {
  const engine = newEngine();
  const lock = engine.defineLock(P.STORE_POLLED, 1, 'protocol:call', 30_000, 0, '', 1, 1);
  const started = engine.startDefined(4, P.OPTION_RENEW, lock);
  assert.equal(P.resultOf(P.statusOf(started)), 0);
  assert.ok(P.statusOf(started) & P.STATUS_EFFECTS);
  const [[kind, call, layer], ...rest] = effects(engine);
  assert.deepEqual(rest, []);
  assert.equal(kind, 'call');
  assert.equal(layer, 0);
  assert.equal(call.exec, 4);
  assert.equal(call.method, 'acquire');
  assert.equal(call.key, 'protocol:call');
  assert.equal(call.owner, engine.layerOwner(4, 0));
  assert.equal(call.queue, false);
  assert.equal(call.ttl, 30_000);

  engine.answerFailed(call.request, 'the store said no');
  const settled = effects(engine).filter(([k]) => k === 'settled');
  assert.equal(settled.length, 1);
  const [, exec, record] = settled[0];
  assert.equal(exec, 4);
  assert.equal(record.outcome, 'error');
  assert.equal(record.code, 'LOCK_STORE_FAILED');
  assert.equal(record.method, 'acquire');
  assert.equal(record.key, 'protocol:call');
  assert.match(record.message, /the store said no/);
});

test(`extend and memRelease answer by name (${engineName})`, () => {
  const engine = newEngine();
  const store = engine.createMemoryStore();
  const started = engine.start(5, P.OPTION_MANUAL, P.STORE_MEMORY, store, 'protocol:lease', 1_000, 0, '', 1, 1);
  assert.equal(result(engine, started), P.STARTED_RUNNING);
  assert.equal(result(engine, engine.extend(5, 2_000)), P.EXTENDED);
  assert.equal(result(engine, engine.finish(5, true, false)), P.FINISHED_VALUE);

  assert.notEqual(engine.memAcquire(store, 'protocol:mem', 'me', 1_000, 1, 1), undefined);
  assert.equal(result(engine, engine.memRelease(store, 'protocol:mem', 'me')), P.MEMORY_RELEASED);
  assert.equal(result(engine, engine.memRelease(store, 'protocol:mem', 'me')), 0, 'released already');
});
