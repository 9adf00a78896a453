'use strict';
// Whether a pipeline reports to OpenTelemetry, decided when it is built: only where
// `@opentelemetry/api` resolves (tried once, at the first build, never at import) and a
// meter or tracer provider is registered with it. Otherwise nothing of OpenTelemetry is
// loaded or called, and the pipeline keeps every fast path.

const { describe } = require('../common/describe.cjs');

/**
 * The OpenTelemetry switch of one API. `load`: a function that returns
 * `{ api, PipelineTelemetry }` (the `@opentelemetry/api` module and lib/otel/recorder.cjs's
 * class), or undefined where the API does not resolve; absent where the entry cannot
 * load a package synchronously (browsers, workerd, Deno), whose bundles then carry no
 * recorder: OpenTelemetry is off there.
 */
function createOpenTelemetry(load) {
  let loaded; // { api, PipelineTelemetry }; null once the API did not resolve

  function module() {
    if (loaded === undefined) {
      try {
        loaded = load() ?? null;
      } catch {
        loaded = null;
      }
    }
    return loaded;
  }

  /** Whether a global meter provider is registered (the API's no-op one otherwise). */
  function metering(api) {
    return api.metrics.getMeter('leasehold') !== api.createNoopMeter();
  }

  /** Whether a global tracer provider is registered. */
  function tracing(api) {
    const tracers = api.trace.getTracerProvider();
    const delegate = typeof tracers.getDelegate === 'function' ? tracers.getDelegate() : tracers;
    return delegate !== new api.ProxyTracerProvider().getDelegate();
  }

  /**
   * What a pipeline of `locks` records with (a PipelineTelemetry), or undefined: the
   * builder's `openTelemetry` option is false, the API does not resolve, or nothing is
   * registered with it.
   */
  function forPipeline(locks, option) {
    if (option === false || load === undefined) return undefined;
    const found = module();
    if (found === null) return undefined;
    const { api, PipelineTelemetry } = found;
    const spans = tracing(api);
    if (!spans && !metering(api)) return undefined;
    return new PipelineTelemetry(api, locks, option ?? {}, spans);
  }

  return { forPipeline };
}

/** Checks the builder's `openTelemetry` option: `false`, or `{ key?: boolean }`. */
function checkOpenTelemetryOption(option) {
  if (option === undefined || option === false) return;
  if (option === null || typeof option !== 'object' || Array.isArray(option)) {
    throw new TypeError(`openTelemetry must be false or an object { key?: boolean }, got ${describe(option)}`);
  }
  for (const name of Object.keys(option)) {
    if (name !== 'key') throw new TypeError(`openTelemetry has no option '${name}' (it takes { key?: boolean })`);
  }
  if (option.key !== undefined && typeof option.key !== 'boolean') {
    throw new TypeError(`openTelemetry.key must be a boolean, got ${describe(option.key)}`);
  }
}

module.exports = { createOpenTelemetry, checkOpenTelemetryOption };
