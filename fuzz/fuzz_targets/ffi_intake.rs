//! The C ABI's argv/envp intake: arbitrary NUL-terminated argv and envp arrays (entries with no
//! '=', empty keys, non-UTF-8 bytes, empty arrays) through `scope_resolve_program`,
//! `scope_launcher_for_env` and `scope_wrap_argv` never crash; every call returns a documented
//! result code, and out-parameters are written only on success.
#![no_main]

use std::ffi::{c_char, CString};
use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::ptr;

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

use synaps_scope_ffi::argv::{scope_argv, scope_argv_free, scope_wrap_argv};
use synaps_scope_ffi::launcher::{scope_launcher, scope_launcher_for_env, scope_launcher_free};
use synaps_scope_ffi::resolve::scope_resolve_program;
use synaps_scope_ffi::{scope_result, scope_string_free, SCOPE_KIND_TOOL};

/// A launcher to wrap with, made once, with no manager needed (only the intake is under test): the
/// probe meets a stand-in private socket that answers the auth and says it has no such property to
/// every call, and a stand-in systemd-run that answers `--version`.
struct Launcher(*mut scope_launcher);
// SAFETY: launchers are thread-safe (R17); this one is never freed.
unsafe impl Send for Launcher {}
// SAFETY: as above.
unsafe impl Sync for Launcher {}

fn launcher() -> *const scope_launcher {
    static LAUNCHER: OnceLock<Launcher> = OnceLock::new();
    LAUNCHER
        .get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("synaps-fuzz-{}", std::process::id()));
            // One left by an earlier run whose process had this pid holds its socket, which the
            // bind below would refuse (EADDRINUSE): the first input's crash, seen once in CI.
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let socket_dir = dir.join("runtime/systemd");
            std::fs::create_dir_all(&socket_dir).unwrap();
            let listener = UnixListener::bind(socket_dir.join("private")).unwrap();
            std::thread::spawn(move || {
                for mut stream in listener.incoming().flatten() {
                    let mut seen = Vec::new();
                    let mut byte = [0u8; 1];
                    while !seen.ends_with(b"BEGIN\r\n") && stream.read(&mut byte).unwrap_or(0) == 1
                    {
                        seen.push(byte[0]);
                    }
                    let _ = stream.write_all(b"OK 0123456789abcdef0123456789abcdef\r\n");
                    while let Some(serial) = read_call(&mut stream) {
                        let _ = stream.write_all(&no_such_property(serial));
                    }
                }
            });
            let fake = dir.join("systemd-run");
            std::fs::write(
                &fake,
                "#!/bin/sh\n[ \"$1\" = --version ] && echo 'systemd 254 (fuzz)'\nexit 0\n",
            )
            .unwrap();
            std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            let env = [
                format!("PATH={}:/usr/bin:/bin", dir.display()),
                format!("XDG_RUNTIME_DIR={}", dir.join("runtime").display()),
                "SYNAPS_CONFIG=/nonexistent".to_owned(),
                "SYNAPS_SCOPE_LAUNCHER=systemd-run".to_owned(),
            ]
            .map(|e| CString::new(e).unwrap());
            let env_ptrs = pointers(&env);
            let mut out = ptr::null_mut();
            // SAFETY: a NULL-terminated array of live strings; `out` is writable.
            let result =
                unsafe { scope_launcher_for_env(env_ptrs.as_ptr(), SCOPE_KIND_TOOL, &mut out) };
            assert_eq!(result, scope_result::Ok);
            assert!(!out.is_null(), "the stand-ins make scopes available");
            Launcher(out)
        })
        .0
}

/// The serial of the next message on `stream` (read whole), or None when it ends.
fn read_call(stream: &mut std::os::unix::net::UnixStream) -> Option<u32> {
    let mut fixed = [0u8; 16];
    stream.read_exact(&mut fixed).ok()?;
    let word = |at: usize| u32::from_le_bytes(fixed[at..at + 4].try_into().unwrap()) as usize;
    let fields = (word(12) + 7) / 8 * 8;
    let mut rest = vec![0u8; fields + word(4)];
    stream.read_exact(&mut rest).ok()?;
    Some(word(8) as u32)
}

/// An error reply to the call `reply_to`: `org.freedesktop.DBus.Error.UnknownProperty`, no body.
fn no_such_property(reply_to: u32) -> Vec<u8> {
    let name = b"org.freedesktop.DBus.Error.UnknownProperty";
    let mut fields = vec![4, 1, b's', 0];
    fields.extend_from_slice(&(name.len() as u32).to_le_bytes());
    fields.extend_from_slice(name);
    fields.push(0);
    while fields.len() % 8 != 0 {
        fields.push(0);
    }
    fields.extend_from_slice(&[5, 1, b'u', 0]);
    fields.extend_from_slice(&reply_to.to_le_bytes());
    let mut message = vec![b'l', 3, 0, 1];
    message.extend_from_slice(&0u32.to_le_bytes());
    message.extend_from_slice(&1u32.to_le_bytes());
    message.extend_from_slice(&(fields.len() as u32).to_le_bytes());
    message.extend_from_slice(&fields);
    while message.len() % 8 != 0 {
        message.push(0);
    }
    message
}

/// The input's NUL-free pieces, split at `separator`, as C strings.
fn entries(bytes: &[u8], separator: u8) -> Vec<CString> {
    bytes
        .split(|&b| b == separator)
        .take(64)
        .map(|piece| {
            CString::new(
                piece
                    .iter()
                    .copied()
                    .filter(|&b| b != 0)
                    .collect::<Vec<u8>>(),
            )
            .unwrap()
        })
        .collect()
}

fn pointers(strings: &[CString]) -> Vec<*const c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(ptr::null()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let (argv_part, env_part) = match data.iter().position(|&b| b == 0xff) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let argv = entries(argv_part, b'\n');
    let env = entries(env_part, b'\n');
    let argv_ptrs = pointers(&argv);
    let env_ptrs = pointers(&env);
    let program = argv_ptrs[0];
    let sentinel = 0x1 as *mut c_char;
    let mut out = sentinel;
    // SAFETY: both arrays are NULL-terminated arrays of live NUL-terminated strings; `out` is writable.
    let result =
        unsafe { scope_resolve_program(program, env_ptrs.as_ptr(), ptr::null(), &mut out) };
    match result {
        scope_result::Ok => {
            assert!(!out.is_null() && out != sentinel);
            // SAFETY: a string the library returned, freed once.
            unsafe { scope_string_free(out) };
        }
        scope_result::NotFound | scope_result::InvalidArgument | scope_result::NullParameter => {
            assert_eq!(out, sentinel, "out written on failure");
        }
        other => panic!("undocumented result {other:?}"),
    }

    // The same argv and envp through the wrap.
    let mut wrapped: *mut scope_argv = sentinel.cast();
    // SAFETY: a live launcher; NULL-terminated arrays of live strings; `wrapped` is writable.
    let result = unsafe {
        scope_wrap_argv(
            launcher(),
            argv_ptrs.as_ptr(),
            env_ptrs.as_ptr(),
            ptr::null(),
            &mut wrapped,
        )
    };
    match result {
        scope_result::Ok => {
            assert!(!wrapped.is_null() && wrapped != sentinel.cast());
            // SAFETY: an argv the library returned, freed once.
            unsafe { scope_argv_free(wrapped) };
        }
        scope_result::InvalidArgument | scope_result::NullParameter => {
            assert_eq!(wrapped, sentinel.cast(), "out written on failure");
        }
        other => panic!("undocumented result {other:?}"),
    }

    // The envp through a launcher request, with scopes switched off by a last entry so that
    // nothing is spawned: every entry before it is still parsed and validated.
    let mut env_off = env.clone();
    env_off.push(CString::new("SYNAPS_PROCESS_SCOPES=off").unwrap());
    let off_ptrs = pointers(&env_off);
    let mut none: *mut scope_launcher = sentinel.cast();
    // SAFETY: a NULL-terminated array of live strings; `none` is writable.
    let result = unsafe { scope_launcher_for_env(off_ptrs.as_ptr(), SCOPE_KIND_TOOL, &mut none) };
    match result {
        scope_result::Ok => {
            assert!(none.is_null(), "off means a direct launch");
            // SAFETY: NULL is accepted.
            unsafe { scope_launcher_free(none) };
        }
        scope_result::InvalidArgument => {
            assert_eq!(none, sentinel.cast(), "out written on failure")
        }
        other => panic!("undocumented result {other:?}"),
    }
});
