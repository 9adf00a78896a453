// The browser entry's engine: no top-level await, so every bundler's default output
// (esbuild's iife, --target=es2020) takes it. The wasm module loads on the first
// execution, withLock or acquireLock, or when the app calls `init()`, from the package's
// own file or from where `init({ wasm })` says.
//
// Before it has loaded: building pipelines works (the wasm engine's durations are
// checked in JavaScript, lib/entries/durations.cjs), executions wait for the load, and what needs the engine at
// once (a new MemoryLockStore, a FakeTimeProvider's clock) throws an Error that says to
// `await init()` first.
import { createApi } from '../../dist/wasm/host.mjs';
import { checkDuration } from '../../dist/wasm/durations.mjs';
import { checkInitOptions } from '../../dist/wasm/init-options.mjs';
import initModule, { WasmEngine, keepPanics, takePanic } from '../../dist/wasm/leasehold_wasm.mjs';

function notLoaded() {
  const error = new Error(
    'leasehold: the wasm engine has not loaded yet: `await init()` before using a MemoryLockStore or a FakeTimeProvider ' +
      '(executions, withLock and acquireLock wait for it on their own)',
  );
  error.code = 'LEASEHOLD_ENGINE_FAILURE';
  return error;
}

/** What a wasm source is, for an error message. */
function sourceName(wasm) {
  if (typeof wasm === 'string' || wasm instanceof URL) return String(wasm);
  if (typeof Request === 'function' && wasm instanceof Request) return wasm.url;
  if (typeof Response === 'function' && wasm instanceof Response) return `a Response from ${wasm.url || 'nowhere'}`;
  if (wasm instanceof WebAssembly.Module) return 'a WebAssembly.Module';
  return 'the bytes given';
}

/**
 * The API with a lazily loaded engine, and its `init`. `packageWasm()` gives the URL of
 * the package's own `.wasm` file; it throws where the bundle has no `import.meta.url`.
 */
export function createLazyApi(packageWasm) {
  let loaded = false;
  let loading;

  const binding = {
    Engine: class Engine extends WasmEngine {
      constructor(fake, start, seed) {
        if (!loaded) throw notLoaded();
        super(fake, start, seed);
      }
    },
    checkDuration,
    takePanic,
  };
  const api = createApi(binding, { engine: 'wasm', AsyncLocalStorage: undefined });

  // Until the engine has loaded, executions (withLock's and settle's too) wait for it;
  // then the pipeline's own `execute` is back, with no cost per call.
  const proto = api.ResiliencePipeline.prototype;
  const { execute, executeOn } = proto;
  proto.execute = function executeAfterLoad(callback, options) {
    return ready().then(() => execute.call(this, callback, options));
  };
  proto.executeOn = function executeOnAfterLoad(key, callback) {
    return ready().then(() => executeOn.call(this, key, callback));
  };
  const acquireLock = api.acquireLock;
  api.acquireLock = function acquireLockAfterLoad(store, key, ttl, options) {
    return loaded ? acquireLock(store, key, ttl, options) : ready().then(() => acquireLock(store, key, ttl, options));
  };

  async function load(wasm) {
    let source = wasm;
    try {
      source ??= packageWasm();
    } catch (cause) {
      throw new Error(
        "leasehold: cannot tell where its wasm module is (this bundle has no import.meta.url): serve the package's " +
          "dist/wasm/leasehold_wasm_bg.wasm and call init({ wasm: itsUrl }) first",
        { cause },
      );
    }
    try {
      await initModule({ module_or_path: source });
    } catch (cause) {
      throw new Error(
        `leasehold: could not load its wasm module from ${sourceName(source)} (${cause?.message ?? cause}); ` +
          "where a bundler does not copy the package's .wasm file, serve it yourself and call init({ wasm: itsUrl })",
        { cause },
      );
    }
    keepPanics();
    loaded = true;
    proto.execute = execute;
    proto.executeOn = executeOn;
  }

  /** The load under way or done; a failed load is tried again on the next call. */
  function start(wasm) {
    const attempt = load(wasm);
    loading = attempt;
    attempt.catch(() => {
      if (loading === attempt) loading = undefined;
    });
    return attempt;
  }

  function ready() {
    return loaded ? Promise.resolve() : (loading ?? start(undefined));
  }

  /**
   * Loads the engine (once): from `options.wasm` (a URL, Request, Response, compiled
   * module or bytes), else from the package's own file. Resolves when it can run.
   */
  api.init = function init(options) {
    let wasm;
    try {
      wasm = checkInitOptions(options);
    } catch (error) {
      return Promise.reject(error);
    }
    if (loaded) return Promise.resolve();
    if (!loading) return start(wasm);
    if (wasm === undefined) return loading;
    // A load from the package's file is under way (an execution started it): the app's
    // source is tried if that one fails.
    const previous = loading;
    const attempt = previous.catch(() => (loaded ? undefined : load(wasm)));
    loading = attempt;
    attempt.catch(() => {
      if (loading === attempt) loading = undefined;
    });
    return attempt;
  };
  return api;
}
