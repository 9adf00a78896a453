'use strict';
// The JavaScript host of the Rust engine, shared by the native addon and the wasm
// module. The engine decides everything (when to try, poll, renew, when a lease is
// lost, who is woken, how an execution settles); the host only carries out what it
// asks: it calls JS stores and reports their answers, runs callbacks, aborts signals,
// keeps one timer, and turns results into Promises and error classes.
//
// This file assembles one API from the modules in lib/host/, each with one job:
//   engine-host.cjs   EngineHost: engine calls, store calls, effects, the one timer
//   callbacks.cjs     how a callback is started (its job, its ambient context)
//   execution.cjs     HostedExecution (what the host asks of an execution), Execution,
//                     ResilienceContext, getLockToken
//   pipeline.cjs      ResiliencePipelineBuilder, ResiliencePipeline
//   lease.cjs         acquireLock, LeaseHandle
//   with-lock.cjs     withLock
//   clock.cjs         FakeTimeProvider and the system clock's host
//   memory-store.cjs  MemoryLockStore
//   options.cjs       argument checks
// The engine↔host protocol is lib/host/protocol.cjs; the bindings' fast paths,
// lib/host/fast-calls.cjs.

const { LockNotAcquiredError, LockLostError, LockStoreError, LockLimitMismatchError, isRejection, fromEngine } = require('./errors.cjs');
const { withFastCalls } = require('./fast-calls.cjs');
const { createChecks } = require('./options.cjs');
const { defineEngineHost } = require('./engine-host.cjs');
const { defineClocks } = require('./clock.cjs');
const { defineMemoryLockStore } = require('./memory-store.cjs');
const { defineExecutions, LOCK_TOKEN } = require('./execution.cjs');
const { createNesting } = require('./callbacks.cjs');
const { definePipelines } = require('./pipeline.cjs');
const { defineLeases } = require('./lease.cjs');
const { defineWithLock } = require('./with-lock.cjs');
const { CandidateNames } = require('./election-names.cjs');
const { defineElection } = require('./election.cjs');
const { defineLeaderWatch } = require('./leader-watch.cjs');
const { createOpenTelemetry } = require('../otel/detect.cjs');

/**
 * The API on one binding ({ Engine, checkDuration, takePanic? }, from lib/entries/native.cjs
 * or a wasm loader). `options`: `engine` ('native' or 'wasm'), `engineFallbackReason`,
 * `AsyncLocalStorage` where the runtime has one, `memoryWaitRefused` where it cannot
 * wait on an in-process store (workerd), `ownerPrefix` what owner ids start with,
 * `loadOpenTelemetry` where the runtime can require `@opentelemetry/api` and the
 * recorder (lib/otel/detect.cjs).
 */
function createApi(rawBinding, options) {
  const binding = withFastCalls(rawBinding);
  // What the modules share, passed to each one's factory; filled in dependency order,
  // every field present from the start.
  const api = {
    binding,
    fromEngine: (error) => fromEngine(error, binding.takePanic),
    ambient: options.AsyncLocalStorage ? new options.AsyncLocalStorage() : undefined,
    // Whether AsyncLocalStorage sits on AsyncContextFrame (lib/entries/index.cjs): then a callback
    // in a promise job of its own enters its context without leaving it (`runCallback`).
    enterInJob: options.enterInJob === true,
    // Without AsyncLocalStorage (browsers), the ambient context is the one whose
    // callback is running synchronously right now (set by Execution#run).
    syncContext: undefined,
    memoryWaitRefused: options.memoryWaitRefused,
    // What every owner id starts with (lib/owner-prefix.cjs): where the runtime has a
    // host name and a pid; '' elsewhere.
    ownerPrefix: options.ownerPrefix ?? '',
    nested: createNesting(),
    // What a pipeline records to OpenTelemetry with, decided at its build.
    openTelemetry: createOpenTelemetry(options.loadOpenTelemetry),
    checkDuration: undefined,
    checkTtl: undefined,
    refuseMemoryWait: undefined,
    lingerKind: undefined,
    EngineHost: undefined,
    FakeTimeProvider: undefined,
    systemHost: undefined,
    hostOf: undefined,
    MemoryLockStore: undefined,
    HostedExecution: undefined,
    ResilienceContext: undefined,
    Execution: undefined,
    getLockToken: undefined,
    liveContext: undefined,
    ResiliencePipeline: undefined,
    ResiliencePipelineBuilder: undefined,
    LeaseHandle: undefined,
    acquireLock: undefined,
  };
  Object.assign(api, createChecks(api));
  api.EngineHost = defineEngineHost(api);
  Object.assign(api, defineClocks(api));
  api.MemoryLockStore = defineMemoryLockStore(api);
  Object.assign(api, defineExecutions(api));
  Object.assign(api, definePipelines(api));
  Object.assign(api, defineLeases(api));
  const withLock = defineWithLock(api);

  const exported = {
    engine: options.engine,
    // Why Node/Bun run wasm instead of the native addon; undefined when nothing fell back.
    engineFallbackReason: options.engineFallbackReason,
    ResiliencePipelineBuilder: api.ResiliencePipelineBuilder,
    ResiliencePipeline: api.ResiliencePipeline,
    MemoryLockStore: api.MemoryLockStore,
    FakeTimeProvider: api.FakeTimeProvider,
    LockNotAcquiredError,
    LockLostError,
    LockStoreError,
    LockLimitMismatchError,
    isRejection,
    getLockToken: api.getLockToken,
    LOCK_TOKEN,
    acquireLock: api.acquireLock,
    withLock,
  };
  // The election campaigns through the exported acquireLock: where the engine loads
  // lazily (browsers), that one waits for it.
  const names = new CandidateNames((store) => store instanceof api.MemoryLockStore);
  const { campaign, lead } = defineElection(api, (...args) => exported.acquireLock(...args), names);
  Object.assign(exported, { campaign, lead }, defineLeaderWatch(api, names));
  // For the project's own tests (forcing a panic, reading engine counters); not an API.
  Object.defineProperty(exported, Symbol.for('leasehold.internals'), {
    value: {
      binding,
      hostOf: (timeProvider) => api.hostOf(timeProvider, 'timeProvider'),
      call: (fn) => {
        try {
          return fn();
        } catch (error) {
          throw api.fromEngine(error);
        }
      },
    },
  });
  return exported;
}

module.exports = { createApi };
