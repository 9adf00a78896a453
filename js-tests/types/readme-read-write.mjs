/// <reference types="node" />
// The README's snippet, verbatim (js-tests/readme.test.mjs checks that it is).
import { ResiliencePipelineBuilder, getLockToken } from 'leasehold';

const read = new ResiliencePipelineBuilder().addLock({ key: 'doc:7', mode: 'shared', wait: Infinity }).build();
const write = new ResiliencePipelineBuilder().addLock({ key: 'doc:7', mode: 'exclusive', wait: Infinity }).build();
let log = '';
const step = (what = '') => async () => {
  log += `${what} in, `;
  await new Promise((resolve) => setTimeout(resolve, 10));
  log += `${what} out, `;
  return getLockToken() ?? 0;
};

const [a, b, w] = await Promise.all([read.execute(step('read A')), read.execute(step('read B')), write.execute(step('write'))]);
console.log(log.slice(0, -2));
console.log(w > a && w > b ? "the writer's token exceeds the readers'" : 'tokens out of order');
