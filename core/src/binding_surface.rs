//! The engine's methods as both bindings expose them to JavaScript, written once.
//!
//! [`binding_surface!`](crate::binding_surface) hands every row to a macro of the
//! binding's, which adds its own attributes (`#[napi]`, `#[wasm_bindgen(js_name)]`)
//! and emits the methods. A row reads
//!
//! ```text
//! /// docs
//! jsName => fn rust_name(&mut self, arg: Type) -> [ReturnType] { body }
//! jsName => fn rust_name(&self) { body }
//! ```
//!
//! where `jsName` is the name `lib/` calls, `rust_name` its snake case (napi derives
//! the JavaScript name from it; a test checks that both agree). The bodies only
//! convert: each calls the core once. A binding that expands the table provides, on
//! its engine type, the fields `inner` ([`Engine`](crate::Engine)), `outer_locks`
//! ([`PendingLocks`](crate::host::PendingLocks)), `arm_at` (`f64`) and `strings`
//! (`Vec<String>`) and a method `flags(&mut self) -> u32`
//! ([`status_flags`](crate::host::status_flags)); and, in scope, `Thrown` (its error
//! type: a `Result<T, Thrown>` throws to JavaScript) with `to_js_error`, which turns a
//! [`LockError`](crate::LockError) into it.
//!
//! Not here, and written by each binding: the calls every execution makes
//! (`startDefined`, `finish`, `token`, `layerOwner`, `answerAcquire`, `answerRelease`),
//! which each binding makes fast its own way; the constructor, whose arguments each
//! runtime passes its way; and `panicForTests`, whose panic must come from the binding
//! (a panic's location names its file, and each file named adds to the wasm module).

/// Expands to `$emit! { rows }`: the engine methods both bindings share, as
/// `core/src/binding_surface.rs` describes.
#[doc(hidden)]
#[macro_export]
macro_rules! binding_surface {
    ($emit:ident) => {
        $emit! {
            /// The engine's time in milliseconds.
            now => fn now(&self) -> [f64] {
                self.inner.now() as f64
            }

            /// When to fire the host timer, after a status with `TIMER_ARM`.
            armAt => fn arm_at(&self) -> [f64] {
                self.arm_at
            }

            /// A new memory store of this engine; its id.
            createMemoryStore => fn create_memory_store(&mut self) -> [u32] {
                self.inner.create_memory_store()
            }

            /// Forgets a memory store nothing uses any more; whether it was dropped.
            dropMemoryStore => fn drop_memory_store(&mut self, id: u32) -> [bool] {
                self.inner.drop_memory_store(id)
            }

            /// The fencing token, or `undefined` when the key is held; minus the key's
            /// limit when it is held with another limit than `limit`.
            #[allow(clippy::too_many_arguments)]
            memAcquire => fn mem_acquire(
                &mut self,
                store: u32,
                key: String,
                owner: String,
                ttl: f64,
                limit: u32,
                weight: u32,
            ) -> [Result<Option<f64>, Thrown>] {
                let answer = self
                    .inner
                    .memory_acquire(store, &key, &owner, ttl as $crate::Millis, limit, weight)
                    .map_err(to_js_error)?;
                Ok(match answer {
                    $crate::TryAcquire::Acquired(token) => Some(token as f64),
                    $crate::TryAcquire::Held { .. } => None,
                    $crate::TryAcquire::Mismatch { limit } => Some(-f64::from(limit)),
                })
            }

            /// Whether `owner`'s live lease was extended.
            memRenew => fn mem_renew(&mut self, store: u32, key: String, owner: String, ttl: f64)
                -> [Result<bool, Thrown>]
            {
                self.inner.memory_renew(store, &key, &owner, ttl as $crate::Millis).map_err(to_js_error)
            }

            /// Status word; bit 1 set when `owner` held a live lease that ended.
            memRelease => fn mem_release(&mut self, store: u32, key: String, owner: String)
                -> [Result<u32, Thrown>]
            {
                let released = self.inner.memory_release(store, &key, &owner).map_err(to_js_error)?;
                Ok(u32::from(released) | self.flags())
            }

            /// Milliseconds left on the live lease of `key`, `undefined` when free.
            memTtl => fn mem_ttl(&mut self, store: u32, key: String) -> [Result<Option<f64>, Thrown>] {
                Ok(self.inner.memory_ttl(store, &key).map_err(to_js_error)?.map(|t| t as f64))
            }

            /// Keys held or waited for.
            memSize => fn mem_size(&mut self, store: u32) -> [Result<u32, Thrown>] {
                Ok(self.inner.memory_size(store).map_err(to_js_error)? as u32)
            }

            /// The holder and waiters of `key`, flat (`Inspection::into_words`); empty when
            /// nothing is there. Reads only.
            memInspect => fn mem_inspect(&mut self, store: u32, key: String) -> [Result<Vec<String>, Thrown>] {
                Ok($crate::Inspection::into_words(self.inner.memory_inspect(store, &key).map_err(to_js_error)?))
            }

            /// Up to `limit` held keys starting with `prefix`, after `after`, in order.
            memList => fn mem_list(&mut self, store: u32, prefix: String, after: Option<String>, limit: u32)
                -> [Result<Vec<String>, Thrown>]
            {
                self.inner.memory_list(store, &prefix, after.as_deref(), limit as usize).map_err(to_js_error)
            }

            /// Makes owner ids drawn from now on start with `prefix`.
            setOwnerPrefix => fn set_owner_prefix(&mut self, prefix: String) {
                self.inner.set_owner_prefix(&prefix);
            }

            /// Entries kept in memory (for tests of boundedness).
            memEntries => fn mem_entries(&mut self, store: u32) -> [Result<u32, Thrown>] {
                Ok(self.inner.memory_entries(store).map_err(to_js_error)? as u32)
            }

            /// Defines a lock once (`Engine::define_lock`): its id, or -1 when the engine
            /// keeps no more; executions on it then start with `startDefined`.
            #[allow(clippy::too_many_arguments)]
            defineLock => fn define_lock(
                &mut self,
                kind: u32,
                store: u32,
                key: String,
                ttl: f64,
                wait: f64,
                name: String,
                limit: u32,
                weight: u32,
            ) -> [Result<i32, Thrown>] {
                let spec = $crate::host::lock_spec(kind, store, key, ttl, wait, name, limit, weight).map_err(to_js_error)?;
                Ok(self.inner.define_lock(spec).map_err(to_js_error)?.map_or(-1, |id| id as i32))
            }

            /// Lets go of one definition of a lock (`Engine::undefine_lock`): its pipeline
            /// is gone.
            undefineLock => fn undefine_lock(&mut self, lock: u32) -> [bool] {
                self.inner.undefine_lock(lock)
            }

            /// How many distinct locks are defined (for tests of boundedness).
            definedLocks => fn defined_locks(&self) -> [u32] {
                self.inner.defined_locks() as u32
            }

            /// Adds an outer lock for the next `start`.
            #[allow(clippy::too_many_arguments)]
            addLock => fn add_lock(
                &mut self,
                kind: u32,
                store: u32,
                key: String,
                ttl: f64,
                wait: f64,
                name: String,
                limit: u32,
                weight: u32,
            ) -> [Result<(), Thrown>] {
                self.outer_locks.add(kind, store, key, ttl, wait, name, limit, weight).map_err(to_js_error)
            }

            /// Starts `exec` under the outer locks added so far plus this innermost one.
            /// `options`: bit 0 renew, bit 1 telemetry, bit 2 manual lease, bit 3 direct
            /// (`host::DIRECT`). Returns the status word of `host::start_word`: above it,
            /// 256 × the innermost token when `STARTED_RUNNING` says to run now, or 256 × the
            /// request of a store call handed back.
            #[allow(clippy::too_many_arguments)]
            start => fn start(
                &mut self,
                exec: u32,
                options: u32,
                kind: u32,
                store: u32,
                key: String,
                ttl: f64,
                wait: f64,
                name: String,
                limit: u32,
                weight: u32,
            ) -> [Result<f64, Thrown>] {
                let started = self
                    .outer_locks
                    .start(&mut self.inner, exec, options, kind, store, key, ttl, wait, name, limit, weight)
                    .map_err(to_js_error)?;
                Ok($crate::host::start_word(&mut self.inner, exec, options, started, &mut self.arm_at))
            }

            /// Takes over a memory-store lease the host granted on its fast path
            /// (`Engine::adopt`) as running execution `exec`; the status flags.
            #[allow(clippy::too_many_arguments)]
            adopt => fn adopt(
                &mut self,
                exec: u32,
                options: u32,
                store: u32,
                key: String,
                ttl: f64,
                wait: f64,
                token: f64,
                held_for: f64,
                name: String,
            ) -> [Result<u32, Thrown>] {
                let spec = $crate::host::lock_spec($crate::host::store_kind::MEMORY, store, key, ttl, wait, name, 1, 1)
                    .map_err(to_js_error)?;
                let held_for = $crate::duration::clock_step(held_for.max(0.0), "heldFor").map_err(|e| to_js_error(e.into()))?;
                self.inner
                    .adopt(exec, spec, $crate::host::exec_options(options), token as u64, held_for)
                    .map_err(to_js_error)?;
                Ok(self.flags())
            }

            /// Status word; bit 1 set when the execution was still acquiring and is
            /// cancelled.
            cancel => fn cancel(&mut self, exec: u32) -> [u32] {
                u32::from(self.inner.cancel(exec)) | self.flags()
            }

            /// The fencing token of lock `layer` of `exec`.
            layerToken => fn layer_token(&self, exec: u32, layer: u32) -> [Option<f64>] {
                self.inner.layer_token(exec, layer).map(|t| t as f64)
            }

            /// Makes JS store `store` hand leases over locally, with turns of `turn` ms
            /// (negative: it does not).
            setStoreHandoff => fn set_store_handoff(&mut self, store: u32, turn: f64) {
                self.inner.set_store_handoff(store, (turn >= 0.0).then_some(turn as u64));
            }

            /// A store answered `renew`.
            answerRenew => fn answer_renew(&mut self, request: u32, renewed: bool) -> [u32] {
                self.inner.answer(request, $crate::Answer::Renewed(renewed));
                self.flags()
            }

            /// Extends manual lease `exec` now, to `ttl` ms (or its own ttl).
            extend => fn extend(&mut self, exec: u32, ttl: Option<f64>) -> [Result<u32, Thrown>] {
                let ttl = ttl
                    .map(|t| $crate::duration::from_millis(t, "ttl"))
                    .transpose()
                    .map_err(|e| to_js_error(e.into()))?;
                let extend = self.inner.extend(exec, ttl).map_err(to_js_error)?;
                Ok($crate::host::extend_status(extend) | self.flags())
            }

            /// The key of lock `layer` of `exec`, `undefined` when none.
            layerKey => fn layer_key(&self, exec: u32, layer: u32) -> [Option<String>] {
                self.inner.layer_key(exec, layer).map(str::to_owned)
            }

            /// The store threw (`bad` is `undefined`; the host keeps the thrown value under
            /// `request`) or answered with a wrong shape (`bad` says what was expected).
            answerFailed => fn answer_failed(&mut self, request: u32, bad: Option<String>) -> [u32] {
                let failure = match bad {
                    Some(message) => $crate::StoreFailure::BadAnswer(message),
                    None => $crate::StoreFailure::Threw(request),
                };
                self.inner.answer(request, $crate::Answer::Failed(failure));
                self.flags()
            }

            /// A store answered an acquire with `{ limit }`: the key is held with that
            /// limit, not the lock's.
            answerLimit => fn answer_limit(&mut self, request: u32, limit: u32) -> [u32] {
                self.inner.answer(request, $crate::Answer::LimitMismatch(limit));
                self.flags()
            }

            /// A store announced that `key` was released.
            released => fn released(&mut self, kind: u32, store: u32, key: String) -> [Result<u32, Thrown>] {
                self.inner.released($crate::host::store_ref(kind, store).map_err(to_js_error)?, &key);
                Ok(self.flags())
            }

            /// A store that grants on release handed `key` to `owner`, `age` ms ago at most.
            granted => fn granted(
                &mut self,
                kind: u32,
                store: u32,
                key: String,
                owner: String,
                token: f64,
                age: f64,
            ) -> [Result<u32, Thrown>] {
                let claimed = $crate::host::granted(&mut self.inner, kind, store, &key, &owner, token, age)
                    .map_err(to_js_error)?;
                Ok(claimed | self.flags())
            }

            /// The host timer fired.
            onTimer => fn on_timer(&mut self) -> [u32] {
                self.inner.on_timer();
                self.flags()
            }

            /// Moves a fake clock forward by `ms`, running every due timer.
            advance => fn advance(&mut self, ms: f64) -> [Result<u32, Thrown>] {
                let ms = $crate::duration::clock_step(ms, "ms").map_err(|e| to_js_error(e.into()))?;
                self.inner.advance(ms).map_err(to_js_error)?;
                Ok(self.flags())
            }

            /// Every pending effect, flat (`host::take_flat_effects`); `takeStrings()` then
            /// gives the text they point to, when the header says there is some.
            takeEffects => fn take_effects(&mut self) -> [Vec<f64>] {
                let mut numbers = Vec::new();
                $crate::host::take_flat_effects(&mut self.inner, &mut numbers, &mut self.strings);
                numbers
            }

            /// The text the last `takeEffects()` points to.
            takeStrings => fn take_strings(&mut self) -> [Vec<String>] {
                std::mem::take(&mut self.strings)
            }

            /// Executions not yet settled.
            liveExecutions => fn live_executions(&self) -> [u32] {
                self.inner.live_executions() as u32
            }

            /// Store calls not yet answered.
            openRequests => fn open_requests(&self) -> [u32] {
                self.inner.open_requests() as u32
            }
        }
    };
}

#[cfg(test)]
mod tests {
    /// Collects each row's JavaScript and Rust names.
    macro_rules! names {
        ($($(#[$($attr:tt)*])* $js:ident => fn $name:ident ($($args:tt)*) $(-> [$($ret:tt)*])? { $($body:tt)* })*) => {
            [$((stringify!($js), stringify!($name))),*]
        };
    }

    /// napi names a method by the camel case of its Rust name; wasm-bindgen is told the
    /// row's JavaScript name. Both must be the name `lib/` calls.
    #[test]
    fn every_javascript_name_is_the_camel_case_of_its_rust_name() {
        let rows = binding_surface!(names);
        assert_eq!(rows.len(), 35);
        for (js, rust) in rows {
            let mut camel = String::new();
            let mut upper = false;
            for c in rust.chars() {
                match c {
                    '_' => upper = true,
                    c if upper => {
                        camel.extend(c.to_uppercase());
                        upper = false;
                    }
                    c => camel.push(c),
                }
            }
            assert_eq!(js, camel, "{rust}");
        }
    }
}
