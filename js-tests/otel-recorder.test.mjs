// lib/otel/recorder.cjs on its own, against a stand-in for `@opentelemetry/api` whose
// tracer fails: an SDK that throws starting or ending a span never reaches the lock.
// (js-tests/opentelemetry.test.mjs runs the recorder with the real SDK, end to end.)
// Run: node --test js-tests/otel-recorder.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { PipelineTelemetry } = require('../lib/otel/recorder.cjs');

/** A stand-in API whose meter records nothing and whose tracer is `tracer`. */
function apiWith(tracer) {
  const instrument = { record() {}, addCallback() {} };
  const meter = {
    createHistogram: () => instrument,
    createObservableCounter: () => instrument,
    createObservableUpDownCounter: () => instrument,
  };
  return {
    metrics: { getMeter: () => meter },
    trace: { getTracer: () => tracer, setSpan: (context) => context },
    context: { active: () => ({}) },
    SpanKind: { INTERNAL: 0 },
    SpanStatusCode: { ERROR: 2 },
  };
}

const LOCKS = [{ name: 'outer', store: undefined }, { name: 'inner', store: undefined }];

test('a tracer that throws starting a span: the execution records nothing, and nothing throws', () => {
  const tracer = {
    startSpan() {
      throw new Error('tracer down');
    },
  };
  const pipeline = new PipelineTelemetry(apiWith(tracer), LOCKS, {}, true);
  assert.equal(pipeline.begin(['a', 'b']), undefined);
});

test('spans that throw as they end: settled() ends every one and does not throw', () => {
  const ended = [];
  const tracer = {
    startSpan(name) {
      return {
        setAttribute() {},
        addEvent() {},
        end() {
          ended.push(name);
          throw new Error(`cannot end ${name}`);
        },
      };
    },
  };
  const execution = new PipelineTelemetry(apiWith(tracer), LOCKS, {}, true).begin(['a', 'b']);
  // The outer lock is granted: the inner lock's span starts under it.
  execution.event({ outcome: 'acquired', layer: 0, waited: 0, token: 1 }, 0);
  execution.settled();
  assert.deepEqual(ended, ['lock outer', 'lock inner']);
  assert.deepEqual(execution.spans, [undefined, undefined]);
  execution.settled(); // nothing left to end
  assert.deepEqual(ended, ['lock outer', 'lock inner']);
});
