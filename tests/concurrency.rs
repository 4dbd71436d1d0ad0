//! Every entry point may be called from many threads at once; caches and WARN de-duplication
//! stay exact (R17).

mod common;

use std::collections::HashSet;
use std::ffi::OsString;
use std::sync::{Arc, Barrier};

use common::{env_with, rig, run_argv, Capture, TempDir};
use synaps_scope::{launcher_for_env, ScopeKind};

#[test]
fn sixty_four_threads_launch_at_once_with_distinct_units_and_one_warning() {
    let Some(_rig) = rig() else { return };
    let dir = TempDir::new("r17");
    let bad = dir.write(
        "bad.config",
        "tool_scope_slice = r17refused.service\n",
        false,
    );
    let good_env = Arc::new(env_with(&[]));
    let bad_env = Arc::new(env_with(&[("SYNAPS_CONFIG", &bad.into_os_string())]));
    let capture = Capture::default();
    let start = Arc::new(Barrier::new(64));

    let threads: Vec<_> = (0..64)
        .map(|i| {
            let (capture, start) = (capture.clone(), Arc::clone(&start));
            let env = Arc::clone(if i % 4 == 3 { &bad_env } else { &good_env });
            std::thread::spawn(move || {
                capture.run(|| {
                    start.wait();
                    let launcher = launcher_for_env(&env).unwrap();
                    let argv: Vec<OsString> = vec![
                        "sh".into(),
                        "-c".into(),
                        "grep '^0::' /proc/$$/cgroup | cut -c4-".into(),
                    ];
                    let (argv, unit) = match &launcher {
                        Some(l) => {
                            assert_eq!(l.kind(), ScopeKind::Tool);
                            let wrapped = l.wrap(&argv, &env, None);
                            (wrapped.argv, wrapped.unit)
                        }
                        None => (argv, None),
                    };
                    let out = run_argv(&argv, &env).unwrap();
                    assert!(out.status.success(), "thread {i}: {}", out.status);
                    (
                        i,
                        unit,
                        String::from_utf8(out.stdout).unwrap().trim().to_owned(),
                    )
                })
            })
        })
        .collect();

    let mut units = HashSet::new();
    for thread in threads {
        let (i, unit, cgroup) = thread.join().expect("a launch thread panicked");
        if i % 4 == 3 {
            assert_eq!(
                unit, None,
                "thread {i} used the refused slice and went direct"
            );
        } else {
            let unit = unit.unwrap_or_else(|| panic!("thread {i} was not scoped"));
            assert!(
                cgroup.ends_with(&unit),
                "thread {i}: {cgroup} is not in {unit}"
            );
            assert!(units.insert(unit), "thread {i} repeated a unit name");
        }
    }
    assert_eq!(units.len(), 48);
    let warnings = capture.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("r17refused.service"), "{warnings:?}");
}
