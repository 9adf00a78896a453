// Points wasm-bindgen glue at a module whose import and export names wasm-opt shortened
// (--minify-imports-and-exports-and-modules): the long names (`wasmengine_memAcquire`,
// `__wbg_now_1a84…`) are bytes every browser downloads, and only the glue reads them.
//
//   node scripts/wasm-short-names.mjs <module.wasm> <names.json> <glue.js>...
//
// names.json is what wasm-opt printed: `imports` as [module, name, short name], `exports`
// as [name, short name], once per run of the pass (--converge runs it again, on the
// short names). Each glue is rewritten in place: `wasm.<name>` for every export,
// and the keys of the imports object `__wbg_get_imports()` returns. The result is checked
// against the module itself: every import it asks for is provided and every export the
// glue uses exists, so a glue whose shape changes fails the build instead of the page.
import fs from 'node:fs';

const [modulePath, namesPath, ...gluePaths] = process.argv.slice(2);
if (!modulePath || !namesPath || gluePaths.length === 0) {
  console.error('usage: node scripts/wasm-short-names.mjs <module.wasm> <names.json> <glue.js>...');
  process.exit(2);
}

function fail(message) {
  console.error(`[wasm-short-names] error: ${message}`);
  process.exit(1);
}

const names = readNames(namesPath);
const module = new WebAssembly.Module(fs.readFileSync(modulePath));
const moduleImports = WebAssembly.Module.imports(module);
const moduleExports = new Set(WebAssembly.Module.exports(module).map((e) => e.name));
const importModules = new Set(moduleImports.map((i) => i.module));
if (importModules.size !== 1) fail(`expected the imports of one module, found ${[...importModules].join(', ')}`);
const [shortModule] = importModules;

/** The renamings of every run of the pass, composed: original name to final name. */
function readNames(file) {
  const runs = fs
    .readFileSync(file, 'utf8')
    .split(/(?<=^\})\s*(?=^\{)/m)
    .map((text) => JSON.parse(text));
  if (runs.length === 0) fail(`${file} holds no names`);
  const [first, ...later] = runs;
  const imports = first.imports.map(([module, name, short]) => [module, name, short]);
  const exports = first.exports.map(([name, short]) => [name, short]);
  for (const run of later) {
    const importRenames = new Map(run.imports.map(([, name, short]) => [name, short]));
    const exportRenames = new Map(run.exports);
    for (const entry of imports) entry[2] = importRenames.get(entry[2]) ?? entry[2];
    for (const entry of exports) entry[1] = exportRenames.get(entry[1]) ?? entry[1];
  }
  return { imports, exports };
}

const escape = (name) => name.replace(/[$]/g, '\\$');
const exportNames = new Map(names.exports);
const importNames = new Map(names.imports.map(([, name, short]) => [name, short]));
const longModules = new Set(names.imports.map(([longModule]) => longModule));
if (longModules.size !== 1) fail(`expected imports from one module in ${namesPath}`);
const [longModule] = longModules;

for (const gluePath of gluePaths) {
  let glue = fs.readFileSync(gluePath, 'utf8');
  // Longest names first: none is then rewritten inside a longer one.
  for (const [name, short] of [...exportNames].sort((a, b) => b[0].length - a[0].length)) {
    glue = glue.replace(new RegExp(`\\bwasm\\.${escape(name)}\\b`, 'g'), `wasm.${short}`);
  }
  for (const [name, short] of importNames) {
    const key = new RegExp(`^(\\s+)${escape(name)}: function`, 'm');
    if (!key.test(glue)) fail(`${gluePath} does not provide the import ${name}`);
    glue = glue.replace(key, `$1${short}: function`);
  }
  const moduleKey = `"${longModule}": import0,`;
  if (!glue.includes(moduleKey)) fail(`${gluePath} has no imports object for "${longModule}"`);
  glue = glue.replace(moduleKey, `${JSON.stringify(shortModule)}: import0,`);

  for (const [, used] of glue.matchAll(/\bwasm\.([A-Za-z_$][\w$]*)/g)) {
    if (!moduleExports.has(used)) fail(`${gluePath} uses wasm.${used}, which the module does not export`);
  }
  for (const { name } of moduleImports) {
    if (!new RegExp(`^\\s+${escape(name)}: function`, 'm').test(glue)) {
      fail(`${gluePath} does not provide the module's import ${name}`);
    }
  }
  fs.writeFileSync(gluePath, glue);
}
