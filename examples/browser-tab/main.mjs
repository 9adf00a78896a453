// An in-page mutex: every click saves a draft, and saves must not overlap (a second
// request racing the first could overwrite newer text with older). The lock lives in
// the page's memory store, on the wasm engine; nothing is sent anywhere.
import { ResiliencePipelineBuilder, getLockToken, engine, init } from 'leasehold';

const save = document.getElementById('save');
const status = document.getElementById('status');
const logBox = document.getElementById('log');
const log = (text) => {
  logBox.textContent += `${text}\n`;
};

// wait: clicks queue up behind the running save instead of failing.
const saving = new ResiliencePipelineBuilder().addLock({ key: 'save-draft', ttl: '10s', wait: '30s' }).build();

// What happened, for you to read (and for the example's test to check).
const demo = { engine, clicks: 0, saves: [], inside: 0, maxInside: 0, ready: false };
window.leaseholdDemo = demo;

save.addEventListener('click', async () => {
  const click = ++demo.clicks;
  log(`click ${click}: waiting for the lock`);
  await saving.execute(async (context) => {
    // Browsers have no AsyncLocalStorage: pass the context to read the token after an await.
    const token = getLockToken(context);
    demo.inside += 1;
    demo.maxInside = Math.max(demo.maxInside, demo.inside);
    const start = performance.now();
    log(`click ${click}: saving with fencing token ${token}`);
    await new Promise((resolve) => setTimeout(resolve, 300)); // the request to the server
    demo.inside -= 1;
    demo.saves.push({ click, token, start, end: performance.now() });
    log(`click ${click}: saved`);
  });
});

// Load the wasm engine now, not on the first click (an execution would wait for it).
await init();
save.disabled = false;
status.textContent = `ready (engine: ${engine})`;
demo.ready = true;
