//! dbus-broker as the session bus of the world's manager (Fedora's and Arch's default; Debian's
//! `dbus-broker` package, unpacked into the rig's cache, never installed): `dbus.service` gets a
//! drop-in in the manager's runtime unit directory that starts `dbus-broker-launch --scope user`.
//! It runs in a mount namespace of its own where `/usr/bin` shows the package's programs (the
//! launcher runs `/usr/bin/dbus-broker`) and a sink stands for journald's socket, which the rig has
//! not and the launcher will not start without.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The unpacked package's root, fetched with apt the first time.
fn unpacked() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let cache = std::env::var_os("SYNAPS_RIG_CACHE").expect("the rig names its cache");
        let dir = Path::new(&cache).join("dbus-broker");
        let root = dir.join("root");
        if root.join("usr/bin/dbus-broker-launch").exists() {
            return root;
        }
        std::fs::create_dir_all(&dir).unwrap();
        let fetched = Command::new("sh")
            .arg("-c")
            .arg("rm -f dbus-broker_*.deb && apt-get download -q dbus-broker && rm -rf root.new && dpkg-deb -x dbus-broker_*.deb root.new && rm -rf root && mv root.new root")
            .current_dir(&dir)
            .status()
            .expect("sh runs");
        assert!(
            fetched.success() && root.join("usr/bin/dbus-broker-launch").exists(),
            "Debian's dbus-broker package could not be fetched into {} (apt-get download dbus-broker)",
            dir.display()
        );
        root
    })
}

/// The drop-in of `dbus.service` below `runtime_dir`.
fn drop_in(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("systemd/user/dbus.service.d/synaps-rules-broker.conf")
}

/// Makes dbus-broker (`true`) or dbus-daemon the bus `dbus.service` starts, from the manager's
/// next reload on.
pub fn choose(runtime_dir: &Path, broker: bool) {
    let path = drop_in(runtime_dir);
    if !broker {
        let _ = std::fs::remove_file(&path);
        return;
    }
    let bin = unpacked().join("usr/bin");
    let journal = "/run/systemd/journal";
    let script = format!(
        "mount -t overlay overlay -o lowerdir={bin}:/usr/bin /usr/bin && mkdir -p {journal} && \
         mount -t tmpfs tmpfs {journal} && {{ socat -u UNIX-RECV:{journal}/socket OPEN:/dev/null & }} && \
         while [ ! -S {journal}/socket ]; do sleep 0.01; done && \
         exec /usr/bin/dbus-broker-launch --scope user",
        bin = bin.display()
    );
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        format!(
            "[Service]\nExecStart=\nExecStart=/usr/bin/unshare --mount --propagation private /bin/sh -c '{script}'\nExecReload=\n"
        ),
    )
    .unwrap();
}

/// Whether the bus `dbus.service` runs now is dbus-broker.
pub fn runs_broker(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with("dbus-broker"))
}
