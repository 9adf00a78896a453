// Rollup: @rollup/plugin-node-resolve finds packages in node_modules (as for any
// package); importMetaAssets() is the one line leasehold needs: it copies the files that
// `new URL('…', import.meta.url)` names, the wasm module among them.
import { nodeResolve } from '@rollup/plugin-node-resolve';
import { importMetaAssets } from '@web/rollup-plugin-import-meta-assets';

export default {
  input: 'src/index.js',
  output: { dir: 'dist', format: 'es' },
  plugins: [nodeResolve({ browser: true }), importMetaAssets()],
};
