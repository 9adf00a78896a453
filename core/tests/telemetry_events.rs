//! The telemetry events a host turns into metrics: each on a fake clock.

use leasehold_core::{
    Answer, Effect, Engine, Event, ExecOptions, LockSpec, Millis, StoreFailure, StoreMethod, StoreRef, Wake,
};

const EXT: StoreRef = StoreRef::External { id: 7, wake: Wake::Poll };
const TELEMETRY: ExecOptions = ExecOptions { renew: true, telemetry: true, manual: false };

fn engine() -> Engine {
    Engine::with_fake_clock(0, [42; 32])
}

fn lock(key: &str, ttl: Millis, wait: Option<Millis>) -> LockSpec {
    LockSpec { store: EXT, key: key.into(), ttl, wait, linger: 0, name: String::new(), limit: 1, weight: 1 }
}

/// The events taken now, and the request of the one store call with `method`, if any.
fn take(engine: &mut Engine, method: StoreMethod) -> (Vec<Event>, Option<u32>) {
    let (mut events, mut request) = (Vec::new(), None);
    while let Some(effect) = engine.take_effect() {
        match effect {
            Effect::Event { event, .. } => events.push(event),
            Effect::StoreCall { request: r, method: m, .. } if m == method => request = Some(r),
            _ => {}
        }
    }
    (events, request)
}

#[test]
fn a_renewal_reports_its_lag_behind_schedule() {
    let mut e = engine();
    e.start(1, vec![lock("k", 3_000, None)], TELEMETRY).unwrap();
    let (_, acquire) = take(&mut e, StoreMethod::Acquire);
    e.answer(acquire.unwrap(), Answer::Acquired(Some(5)));
    take(&mut e, StoreMethod::Acquire);
    // Due at 1,000 (ttl/3); the store answers 40 ms later.
    e.advance(1_000).unwrap();
    let (_, renew) = take(&mut e, StoreMethod::Renew);
    e.advance(40).unwrap();
    e.answer(renew.unwrap(), Answer::Renewed(true));
    let (events, _) = take(&mut e, StoreMethod::Renew);
    assert_eq!(events, vec![Event::Renewed { token: 5, lag: 40 }]);
    // The next one falls due 1,000 ms after the last was sent (at 1,000), and a failed
    // try's retry counts from that schedule, not from the retry's own.
    e.advance(960).unwrap();
    let (_, renew) = take(&mut e, StoreMethod::Renew);
    e.answer(renew.unwrap(), Answer::Failed(StoreFailure::Threw(1)));
    let (events, _) = take(&mut e, StoreMethod::Renew);
    assert!(matches!(events[..], [Event::RenewalFailed { .. }]), "{events:?}");
    e.advance(50).unwrap();
    let (_, renew) = take(&mut e, StoreMethod::Renew);
    e.answer(renew.unwrap(), Answer::Renewed(true));
    let (events, _) = take(&mut e, StoreMethod::Renew);
    assert_eq!(events, vec![Event::Renewed { token: 5, lag: 50 }]);
}

#[test]
fn a_refused_renewal_is_a_refused_loss_and_a_lapse_is_not() {
    let mut e = engine();
    e.start(1, vec![lock("a", 3_000, None)], TELEMETRY).unwrap();
    e.start(2, vec![lock("b", 3_000, None)], TELEMETRY).unwrap();
    let mut requests = Vec::new();
    while let Some(effect) = e.take_effect() {
        if let Effect::StoreCall { request, .. } = effect {
            requests.push(request);
        }
    }
    for request in requests {
        e.answer(request, Answer::Acquired(Some(1)));
    }
    e.advance(1_000).unwrap();
    let mut renewals = Vec::new();
    while let Some(effect) = e.take_effect() {
        if let Effect::StoreCall { request, exec, .. } = effect {
            renewals.push((exec, request));
        }
    }
    let refused = renewals.iter().find(|(exec, _)| *exec == 1).unwrap().1;
    e.answer(refused, Answer::Renewed(false));
    // The other renewal is never answered: its lease runs out at 3,000.
    e.advance(2_000).unwrap();
    let losses: Vec<(u32, Event)> = std::iter::from_fn(|| e.take_effect())
        .filter_map(|effect| match effect {
            Effect::Event { exec, event: event @ Event::Lost { .. }, .. } => Some((exec, event)),
            _ => None,
        })
        .collect();
    assert_eq!(losses, vec![(1, Event::Lost { refused: true }), (2, Event::Lost { refused: false })]);
}

#[test]
fn a_store_failure_and_a_cancel_end_an_acquire_with_the_time_waited() {
    let mut e = engine();
    e.start(1, vec![lock("k", 3_000, Some(10_000))], TELEMETRY).unwrap();
    let (_, acquire) = take(&mut e, StoreMethod::Acquire);
    e.advance(25).unwrap();
    e.answer(acquire.unwrap(), Answer::Failed(StoreFailure::Threw(3)));
    let (events, _) = take(&mut e, StoreMethod::Acquire);
    assert!(matches!(events[..], [Event::AcquireFailed { waited: 25, .. }]), "{events:?}");

    e.start(2, vec![lock("k", 3_000, Some(10_000))], TELEMETRY).unwrap();
    let (_, acquire) = take(&mut e, StoreMethod::Acquire);
    e.answer(acquire.unwrap(), Answer::Acquired(None));
    e.advance(70).unwrap();
    take(&mut e, StoreMethod::Acquire);
    assert!(e.cancel(2));
    let (events, _) = take(&mut e, StoreMethod::Acquire);
    assert_eq!(events, vec![Event::Cancelled { waited: 70 }]);
}
