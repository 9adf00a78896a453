// The real OpenTelemetry SDK, registered globally with in-memory readers, for tests of
// what leasehold records: metrics read on demand, spans kept in memory.
import { metrics, trace, context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

class OnDemandReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

/** Registers a global meter provider, tracer provider and context manager; returns what reads them. */
export function registerOpenTelemetry() {
  const reader = new OnDemandReader();
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  const spans = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  return {
    spans,
    /** name -> { unit, points: [{ attributes, value }] } of the `leasehold` meter now. */
    async metrics() {
      const { resourceMetrics, errors } = await reader.collect();
      if (errors.length > 0) throw errors[0];
      const out = new Map();
      for (const scope of resourceMetrics.scopeMetrics) {
        if (scope.scope.name !== 'leasehold') continue;
        for (const m of scope.metrics) {
          out.set(m.descriptor.name, { unit: m.descriptor.unit, type: m.descriptor.type, points: m.dataPoints, scope: scope.scope });
        }
      }
      return out;
    },
  };
}

/** The data points of `metric` whose attributes include every pair of `match`. */
export function pointsOf(metric, match) {
  if (metric === undefined) return [];
  return metric.points.filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v));
}
