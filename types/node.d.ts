// `leasehold/node` for TypeScript's older `moduleResolution: node` (node10), which reads
// no `exports`: the same declarations as `leasehold`.
export * from './index';
export { default } from './index';
