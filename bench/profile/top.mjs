// Summarises a V8 .cpuprofile (from `node --cpu-prof`): self time per function, top N,
// and the share of the profile spent under functions whose name matches a pattern.
//
//   node bench/profile/top.mjs file.cpuprofile [N=25] [pattern]
//   node bench/profile/top.mjs --by-file file.cpuprofile...   (self time per script, summed)

import { readFileSync } from 'node:fs';

if (process.argv[2] === '--by-file') {
  const totals = new Map();
  let all = 0;
  for (const f of process.argv.slice(3)) {
    const p = JSON.parse(readFileSync(f, 'utf8'));
    const nodes = new Map(p.nodes.map((n) => [n.id, n]));
    p.samples.forEach((id, i) => {
      const n = nodes.get(id);
      const url = n.callFrame.url;
      const name = n.callFrame.functionName;
      const group = url
        ? url.replace(/^file:\/\//, '').replace(/^.*\/(node_modules\/(@[^/]+\/)?[^/]+)\/.*$/, '$1').replace(/^.*\/(lib|bench|dist)\//, '$1/')
        : name.startsWith('(') ? name : `native: ${name}`;
      const dt = p.timeDeltas[i] ?? 0;
      all += dt;
      totals.set(group, (totals.get(group) ?? 0) + dt);
    });
  }
  const busy = all - (totals.get('(idle)') ?? 0);
  console.log(`${process.argv.length - 3} profiles, ${(all / 1000).toFixed(0)} ms sampled, ${(busy / 1000).toFixed(0)} ms not idle`);
  for (const [g, t] of [...totals].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
    console.log(`${((100 * t) / busy).toFixed(1).padStart(5)} % of busy  ${(t / 1000).toFixed(0).padStart(6)} ms  ${g}`);
  }
  process.exit(0);
}

const [file, nText = '25', pattern] = process.argv.slice(2);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Self time from samples and time deltas.
const self = new Map();
let total = 0;
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0;
  total += dt;
  self.set(id, (self.get(id) ?? 0) + dt);
});

const label = (n) => {
  const f = n.callFrame;
  const where = f.url ? `${f.url.replace(/^.*\/(lib|bench|node_modules)\//, '$1/')}:${f.lineNumber + 1}` : '';
  return `${f.functionName || '(anonymous)'} ${where}`.trim();
};

const perFunction = new Map();
for (const [id, t] of self) {
  const key = label(byId.get(id));
  perFunction.set(key, (perFunction.get(key) ?? 0) + t);
}
const rows = [...perFunction].sort((a, b) => b[1] - a[1]).slice(0, Number(nText));
console.log(`${file}: ${(total / 1000).toFixed(0)} ms sampled`);
for (const [name, t] of rows) console.log(`${((100 * t) / total).toFixed(1).padStart(5)} %  ${(t / 1000).toFixed(1).padStart(8)} ms  ${name}`);

if (pattern) {
  const re = new RegExp(pattern);
  let under = 0;
  for (const [id, t] of self) {
    let cur = id;
    while (cur !== undefined) {
      if (re.test(byId.get(cur).callFrame.functionName)) {
        under += t;
        break;
      }
      cur = parent.get(cur);
    }
  }
  console.log(`under /${pattern}/: ${((100 * under) / total).toFixed(1)} % (${(under / 1000).toFixed(1)} ms)`);
}
