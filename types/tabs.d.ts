// `leasehold/tabs` for TypeScript's older node10 resolution, which reads no exports map: the
// declarations are tabs.d.mts (the entry is an ES module only).
export * from './tabs.mjs';
