//! Three (or any number of) RabbitMQ nodes of their own, clustered: each `rabbit-server` with its
//! own node name, AMQP and distribution ports, data and log folders, all run as the `rabbitmq`
//! user (so they share its Erlang cookie), plugins off; nodes after the first `join_cluster` the
//! first. A node is a process group, killed on [`RabbitCluster::kill`] or drop.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{folder_for, kill_group, run_as, run_as_ok};
use crate::http::free_port;

const USER: &str = "rabbitmq";
const HOME: &str = "/var/lib/rabbitmq";

pub struct RabbitNode {
    /// `vasNNN-1@localhost`.
    pub name: String,
    /// Its AMQP port on 127.0.0.1.
    pub port: u16,
    /// `amqp://guest:guest@127.0.0.1:PORT/%2f`.
    pub url: String,
    child: Option<Child>,
}

pub struct RabbitCluster {
    pub nodes: Vec<RabbitNode>,
    dir: tempfile::TempDir,
}

impl RabbitCluster {
    /// Starts `count` nodes and clusters them; returns once every node runs the broker.
    pub fn start(count: usize) -> RabbitCluster {
        let dir = folder_for(USER);
        let base = dir.path().to_path_buf();
        fs::write(base.join("enabled_plugins"), "[].\n").unwrap();
        // The machine's own broker reads /etc/rabbitmq; these nodes read nothing of it.
        fs::write(base.join("rabbitmq-env.conf"), "").unwrap();
        fs::write(
            base.join("rabbitmq.conf"),
            "disk_free_limit.absolute = 50MB\nvm_memory_high_watermark.relative = 0.8\n",
        )
        .unwrap();
        super::chown(USER, &base);
        let tag = ulid_tag();
        let mut cluster = RabbitCluster {
            nodes: Vec::new(),
            dir,
        };
        for i in 1..=count {
            let name = format!("vas{tag}-{i}@localhost");
            let port = free_port();
            let child = start_node(&base, &name, port);
            cluster.nodes.push(RabbitNode {
                url: format!("amqp://guest:guest@127.0.0.1:{port}/%2f"),
                name,
                port,
                child: Some(child),
            });
        }
        for i in 0..count {
            cluster.await_node(i);
        }
        let first = cluster.nodes[0].name.clone();
        for node in &cluster.nodes[1..] {
            ctl(&node.name, &["stop_app"]);
            ctl(&node.name, &["join_cluster", &first]);
            ctl(&node.name, &["start_app"]);
        }
        for i in 0..count {
            cluster.await_node(i);
        }
        cluster
    }

    /// Every node's URL, comma-separated: what `VAS_AMQP__URL` takes.
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.url.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `rabbitmqctl -n NODE args…` on node `i`; its output.
    pub fn ctl(&self, i: usize, args: &[&str]) -> String {
        ctl(&self.nodes[i].name, args)
    }

    /// For a failed test's report: a function that says, for every node but `except` (one the
    /// test killed), [`state_of`](Self::state_of) it and the last lines of its log.
    pub fn reporter(&self, except: usize) -> impl Fn() -> String + Send + 'static {
        let nodes: Vec<(String, PathBuf)> = (0..self.nodes.len())
            .filter(|&i| i != except)
            .map(|i| (self.nodes[i].name.clone(), self.log_of(i)))
            .collect();
        move || {
            let mut out = String::new();
            for (name, log) in &nodes {
                out.push_str(&Self::state_of(name));
                out.push_str(&crate::process::log_tail(name, log, 60));
            }
            out
        }
    }

    /// What node `name` says of the cluster, its queues (leader, members, ready and unacked
    /// messages, consumers) and its client connections; for a failed test's report, so it never
    /// fails itself (a dead node's answer is its error).
    pub fn state_of(name: &str) -> String {
        let mut out = String::new();
        for args in [
            &["cluster_status"][..],
            &[
                "list_queues",
                "name",
                "leader",
                "members",
                "messages_ready",
                "messages_unacknowledged",
                "consumers",
            ][..],
            &["list_connections", "name", "peer_port", "state"][..],
        ] {
            // `timeout`: a wedged node must not hang the report.
            let mut all = vec!["20", "rabbitmqctl", "-n", name, "-q"];
            all.extend_from_slice(args);
            let output = run_as(USER, &[("HOME", HOME.into())], "timeout", &all);
            out.push_str(&format!(
                "--- {name}: rabbitmqctl {}\n{}{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        out
    }

    /// The node whose AMQP port is `port`.
    pub fn node_with_port(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port == port)
    }

    /// SIGKILL to node `i` and every process it started: no goodbye to clients or peers.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            kill_group(child.id());
            let _ = child.wait();
        }
    }

    fn await_node(&mut self, i: usize) {
        let started = Instant::now();
        loop {
            let node = &mut self.nodes[i];
            let out = run_as(
                USER,
                &[("HOME", HOME.into())],
                "rabbitmqctl",
                &["-n", &node.name, "await_startup", "--timeout", "60"],
            );
            if out.status.success() {
                return;
            }
            let exited = node
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || started.elapsed() > Duration::from_secs(120) {
                let log = fs::read_to_string(self.log_of(i)).unwrap_or_default();
                let tail: String = log
                    .lines()
                    .rev()
                    .take(30)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                panic!(
                    "RabbitMQ node {} did not start ({exited:?}):\n{tail}",
                    self.nodes[i].name
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn log_of(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join("log")
            .join(format!("{}.log", self.nodes[i].name))
    }
}

impl Drop for RabbitCluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

fn ctl(node: &str, args: &[&str]) -> String {
    let mut all = vec!["-n", node];
    all.extend_from_slice(args);
    run_as_ok(USER, &[("HOME", HOME.into())], "rabbitmqctl", &all)
}

fn start_node(base: &std::path::Path, name: &str, port: u16) -> Child {
    let short = name.split('@').next().expect("a node name");
    let dist = free_port();
    let path = |p: &str| base.join(p).display().to_string();
    let env = [
        ("HOME", HOME.to_owned()),
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("RABBITMQ_CONF_ENV_FILE", path("rabbitmq-env.conf")),
        ("RABBITMQ_NODENAME", name.to_owned()),
        ("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1".into()),
        ("RABBITMQ_NODE_PORT", port.to_string()),
        ("RABBITMQ_DIST_PORT", dist.to_string()),
        ("RABBITMQ_CONFIG_FILE", path("rabbitmq")),
        ("RABBITMQ_ADVANCED_CONFIG_FILE", path("advanced.config")),
        ("RABBITMQ_ENABLED_PLUGINS_FILE", path("enabled_plugins")),
        ("RABBITMQ_MNESIA_BASE", path("mnesia")),
        ("RABBITMQ_LOG_BASE", path("log")),
        ("RABBITMQ_PID_FILE", path(&format!("{short}.pid"))),
        ("ERL_EPMD_ADDRESS", "127.0.0.1".into()),
    ];
    let out = fs::File::create(base.join(format!("{short}.out"))).unwrap();
    let mut cmd = Command::new("runuser");
    cmd.args(["-u", USER, "--", "env", "-i"]);
    for (k, v) in &env {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.arg("rabbitmq-server")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        // Its own process group, so that a kill reaches the Erlang VM and its helpers.
        .process_group(0);
    cmd.spawn().expect("rabbitmq-server starts")
}

fn ulid_tag() -> String {
    ulid::Ulid::new().to_string()[20..].to_lowercase()
}
