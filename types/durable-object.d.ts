// `leasehold/durable-object` for TypeScript's older node10 resolution, which reads no exports map: the
// declarations are durable-object.d.mts (the entry is an ES module only).
export * from './durable-object.mjs';
