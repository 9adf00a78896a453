'use strict';
// Installs the engines' fast paths, for both bindings in one place: the calls every
// execution makes (start on a defined lock, finish, token, and on JS stores the first
// owner and the answers) go through cheaper entry points than the bindings' plain
// methods, under the same names and with the same results.
//   native: plain N-API callbacks (bindings-node/src/fast.rs), which an engine takes
//           once `enableFast` has been called on it.
//   wasm:   the `*Fast` exports, which answer plain numbers (-1: an error, kept for
//           `takeError`, or no token): wasm-bindgen hands a `Result` or an `Option`
//           over as an array, one allocation per call.

function startDefinedFast(exec, options, lock) {
  const status = this.startDefinedFast(exec, options, lock);
  if (status < 0) throw this.takeError();
  return status;
}
function finishFast(exec, ok, handoff) {
  const status = this.finishFast(exec, ok, handoff);
  if (status < 0) throw this.takeError();
  return status;
}
function tokenFast(exec) {
  const token = this.tokenFast(exec);
  return token < 0 ? undefined : token;
}

function method(value) {
  return { value, writable: true, configurable: true };
}

/**
 * `binding` ({ Engine, checkDuration, takePanic?, addon? }) with its fast paths: the
 * same object, its Engine's prototype patched (once), or for the native addon
 * (`addon`) a new Engine constructor that enables them on each engine it makes.
 */
function withFastCalls(binding) {
  const addon = binding.addon;
  if (addon !== undefined) {
    const Native = binding.Engine;
    Object.defineProperties(Native.prototype, {
      startDefined: method(addon.fastStartDefined),
      finish: method(addon.fastFinish),
      token: method(addon.fastToken),
      layerOwner: method(addon.fastLayerOwner),
      answerAcquire: method(addon.fastAnswerAcquire),
      answerRelease: method(addon.fastAnswerRelease),
    });
    function Engine(fake, start, seed) {
      const engine = new Native(fake, start, seed);
      addon.enableFast(engine);
      return engine;
    }
    Engine.prototype = Native.prototype;
    return { Engine, checkDuration: binding.checkDuration, takePanic: binding.takePanic };
  }
  const proto = binding.Engine.prototype;
  if (typeof proto?.finishFast === 'function' && proto.finish !== finishFast) {
    Object.defineProperties(proto, {
      startDefined: method(startDefinedFast),
      finish: method(finishFast),
      token: method(tokenFast),
    });
  }
  return binding;
}

module.exports = { withFastCalls };
