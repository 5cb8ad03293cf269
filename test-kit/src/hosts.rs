//! [`Hosts`]: network namespaces standing in for separate machines, each
//! with its own address on a veth pair to this one, made with `ip` and
//! removed when dropped (also when the test fails). Names carry the
//! process id and a counter, so parallel runs do not clash.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Namespaces made for a test; each is a "host" at `addr(i)`.
#[derive(Debug)]
pub struct Hosts {
    names: Vec<String>,
    links: Vec<String>,
    addrs: Vec<Ipv4Addr>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Hosts {
    /// Makes `count` namespaces, each with loopback up,
    /// `net.ipv4.tcp_migrate_req` on (for take-overs) and a veth pair to
    /// this namespace: `10.X.Y.1` here, `10.X.Y.2` there. `None`, printing
    /// why, when namespaces cannot be made here (not root).
    pub fn make(count: usize) -> Option<Hosts> {
        let id = std::process::id() % 10_000;
        let seq = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut hosts = Hosts {
            names: Vec::new(),
            links: Vec::new(),
            addrs: Vec::new(),
        };
        // 10.X.Y.0/30 per host: X from the process, Y from the host's place.
        let x = 100 + (std::process::id() % 150) as u8;
        for i in 0..count {
            let name = format!("pc{id}-{seq}-{i}");
            if let Err(e) = ip(&["netns", "add", &name]) {
                if i == 0 {
                    println!("skipped: cannot make a network namespace: {e}");
                    return None;
                }
                panic!("{e}");
            }
            hosts.names.push(name.clone());
            let (here, there) = (format!("vh{id}{seq}{i}"), format!("vn{id}{seq}{i}"));
            let y = (seq as usize * count + i) as u8;
            let (mine, theirs) = (Ipv4Addr::new(10, x, y, 1), Ipv4Addr::new(10, x, y, 2));
            let migrate = "echo 1 > /proc/sys/net/ipv4/tcp_migrate_req";
            let steps: [&[&str]; 8] = [
                &["link", "add", &here, "type", "veth", "peer", "name", &there],
                &["link", "set", &there, "netns", &name],
                &["addr", "add", &format!("{mine}/30"), "dev", &here],
                &["link", "set", &here, "up"],
                &[
                    "-n",
                    &name,
                    "addr",
                    "add",
                    &format!("{theirs}/30"),
                    "dev",
                    &there,
                ],
                &["-n", &name, "link", "set", &there, "up"],
                &["-n", &name, "link", "set", "lo", "up"],
                &["netns", "exec", &name, "sh", "-c", migrate],
            ];
            for (n, step) in steps.iter().enumerate() {
                ip(step).unwrap_or_else(|e| panic!("{e}"));
                if n == 0 {
                    hosts.links.push(here.clone());
                }
            }
            hosts.addrs.push(theirs);
        }
        Some(hosts)
    }

    /// Host `i`'s address.
    pub fn addr(&self, i: usize) -> Ipv4Addr {
        self.addrs[i]
    }

    /// A command run in host `i`'s namespace.
    pub fn command(&self, i: usize, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.names[i], program]);
        cmd
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // Deleting a namespace removes its end of the veth pair, and with
        // it this end; the explicit delete covers a namespace a process
        // still holds.
        for link in &self.links {
            let _ = ip(&["link", "del", link]);
        }
        for name in &self.names {
            let _ = ip(&["netns", "del", name]);
        }
    }
}
