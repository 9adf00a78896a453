/// <reference types="node" />
// The README's snippet, verbatim (js-tests/readme.test.mjs checks that it is).
import { metrics, trace } from '@opentelemetry/api';
import { MeterProvider, PeriodicExportingMetricReader, InMemoryMetricExporter, AggregationTemporality } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { withLock } from 'leasehold';

// Your usual OpenTelemetry setup, before any lock is used; in-memory here, to print.
const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
const spans = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));

await withLock({ key: 'report', name: 'nightly-report' }, async () => {
  // Meanwhile another run finds the key held, and skips.
  await withLock({ key: 'report', name: 'nightly-report', skipOnLockFailure: true }, () => 'skipped');
});

await reader.forceFlush();
for (const { descriptor, dataPoints } of exporter.getMetrics()[0].scopeMetrics[0].metrics) {
  for (const { attributes, value } of dataPoints) {
    const label = attributes['leasehold.lock.outcome'] ?? attributes['leasehold.lease.end'] ?? '';
    console.log(descriptor.name, label, typeof value === 'number' ? value : `count=${value.count}`);
  }
}
for (const span of spans.getFinishedSpans()) {
  console.log('span', span.name, span.attributes['leasehold.lock.outcome'] ?? `token ${span.attributes['leasehold.lock.fencing_token']}`);
}
await reader.shutdown();
