"""Emulated machines on one Linux box: network namespaces joined by shaped veth links through a bridge.

    with EmulatedMachines(3, rate="1gbit") as cluster:   # as root
        proc = cluster.popen(1, ["python", "-c", "..."])  # runs on machine 1 (hostname gnnc-m1)
        cluster.cut_link(2)                               # ip link set down
        cluster.shape_link(1, "100kbit")                  # the link turns slow
        cluster.kill_machine(0)                           # SIGKILL every process of machine 0

Topology: a switch namespace holds bridge ``br0``; machine ``i`` is a
namespace whose only link ``eth0`` (address ``198.18.0.{i+1}/24``, from the
range reserved for network benchmarks) is a veth pair to port ``m{i}`` of the
bridge. There is no route and no link to the host's own network stack:
nothing is routed beyond the namespaces. Each link is shaped in both
directions: a token bucket (``tc tbf``) of ``rate`` on eth0 (what the
machine sends) and on its bridge port (what it receives), and, with
``delay_ms``, a ``tc netem`` delay on eth0 (one-way latency between two
machines). A machine's hostname (its own UTS namespace) is ``gnnc-m{i}``,
which resolves to its address there (``/etc/netns/<namespace>/hosts``).

Clean-up: leaving the context (also on an exception), a SIGTERM / SIGINT /
SIGHUP, or interpreter exit kills every process in the namespaces and removes
the namespaces (their links and bridge go with them) and their hosts files.
Names carry the creating process id (``gnncem-<pid>-...``); on start, the
namespaces of a run whose process is gone are removed the same way.

``unavailable()`` says why the harness cannot run here (not root, no ``ip``,
no ``unshare``), or returns None.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

PREFIX = "gnncem"
SUBNET = "198.18.0"  # 198.18.0.0/15 is reserved for network benchmarks (RFC 2544)
HOSTS_DIR = Path("/etc/netns")
TBF_QUEUE_MS = 100  # a tbf drops what waits longer than this in its queue
_NAME = re.compile(rf"{PREFIX}-(\d+)-(sw|m\d+)")


def unavailable() -> str | None:
    """Why emulated machines cannot run here, or None."""
    if os.geteuid() != 0:
        return "emulated machines need root (network namespaces, veth links, tc)"
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            return f"emulated machines need the {tool!r} command (iproute2 / util-linux)"
    return None


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode:
        raise RuntimeError(f"emulated machines: {' '.join(argv)} failed: {done.stderr.strip()}")
    return done


def _namespace_pids(ns: str) -> list[int]:
    out = _run("ip", "netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split()]


def _kill_namespace(ns: str) -> None:
    """SIGKILL every process in ``ns`` (until none is left), then delete it and its hosts file."""
    for _ in range(50):
        pids = _namespace_pids(ns)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    _run("ip", "netns", "delete", ns, check=False)
    shutil.rmtree(HOSTS_DIR / ns, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Remove the namespaces (and hosts files) of earlier runs whose creating process is gone; returns them."""
    names = {line.split()[0] for line in _run("ip", "netns", "list", check=False).stdout.splitlines() if line}
    if HOSTS_DIR.is_dir():
        names |= {p.name for p in HOSTS_DIR.iterdir()}
    stale = sorted(n for n in names if (m := _NAME.fullmatch(n)) and not _pid_alive(int(m.group(1))))
    for ns in stale:
        _kill_namespace(ns)
    return stale


class EmulatedMachines:
    """``count`` emulated machines; see the module docstring. ``rate``: tc rate ('1gbit', '10gbit', ...)."""

    def __init__(self, count: int, rate: str = "1gbit", delay_ms: float = 0.0):
        if not 1 <= count <= 10:
            raise ValueError(f"EmulatedMachines: 1 to 10 machines, got {count}")
        why = unavailable()
        if why:
            raise RuntimeError(why)
        self.count, self.rate, self.delay_ms = count, rate, delay_ms
        self.tag = f"{PREFIX}-{os.getpid()}"
        self.switch = f"{self.tag}-sw"
        self.namespaces = [f"{self.tag}-m{i}" for i in range(count)]
        self.procs: list[subprocess.Popen] = []
        self._up = False
        self._previous_handlers: dict = {}

    # ---------------------------------------------------------------- naming
    def address(self, machine: int) -> str:
        return f"{SUBNET}.{machine + 1}"

    def hostname(self, machine: int) -> str:
        return f"gnnc-m{machine}"

    # ------------------------------------------------------------- lifecycle
    def __enter__(self) -> EmulatedMachines:
        remove_stale()
        self._up = True
        atexit.register(self.close)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._previous_handlers[sig] = signal.signal(sig, self._on_signal)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _on_signal(self, signum, frame) -> None:
        self.close()
        raise SystemExit(128 + signum)

    def close(self) -> None:
        """Kill every process on the machines and remove namespaces, links and hosts files (idempotent)."""
        if not self._up:
            return
        self._up = False
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for ns in [*self.namespaces, self.switch]:
            _kill_namespace(ns)
        for proc in self.procs:
            proc.wait()
        for sig, handler in self._previous_handlers.items():
            signal.signal(sig, handler)
        self._previous_handlers = {}
        atexit.unregister(self.close)

    def _build(self) -> None:
        sw = self.switch
        _run("ip", "netns", "add", sw)
        _run("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", sw, "link", "set", "br0", "up")
        hosts = "".join(f"{self.address(i)} {self.hostname(i)}\n" for i in range(self.count))
        for i, ns in enumerate(self.namespaces):
            _run("ip", "netns", "add", ns)
            (HOSTS_DIR / ns).mkdir(parents=True, exist_ok=True)
            (HOSTS_DIR / ns / "hosts").write_text(f"127.0.0.1 localhost\n{hosts}")
            _run("ip", "-n", sw, "link", "add", f"m{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _run("ip", "-n", sw, "link", "set", f"m{i}", "master", "br0", "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            self.shape_link(i, self.rate, self.delay_ms, change=False)

    # ----------------------------------------------------------------- links
    def shape_link(self, machine: int, rate: str, delay_ms: float = 0.0, change: bool = True) -> None:
        """Shape machine ``machine``'s link in both directions: ``rate``, and a one-way ``delay_ms`` on what
        the machine sends (tc netem; refused with the reason where the kernel has no netem)."""
        for ns, dev, delay in ((self.namespaces[machine], "eth0", delay_ms), (self.switch, f"m{machine}", 0.0)):
            if change:
                _run("tc", "-n", ns, "qdisc", "del", "dev", dev, "root", check=False)
            parent = ["root"]
            if delay > 0:
                done = _run(
                    "tc",
                    "-n",
                    ns,
                    "qdisc",
                    "add",
                    "dev",
                    dev,
                    "root",
                    "handle",
                    "1:",
                    "netem",
                    "delay",
                    f"{delay}ms",
                    check=False,
                )
                if done.returncode:
                    raise RuntimeError(
                        f"emulated machines: cannot delay links here: tc netem failed "
                        f"({done.stderr.strip()}); the kernel needs CONFIG_NET_SCH_NETEM"
                    )
                parent = ["parent", "1:"]
            _run(
                "tc",
                "-n",
                ns,
                "qdisc",
                "add",
                "dev",
                dev,
                *parent,
                "handle",
                "2:",
                "tbf",
                "rate",
                rate,
                "burst",
                str(_burst_bytes(rate)),
                "latency",
                f"{TBF_QUEUE_MS}ms",
            )

    def cut_link(self, machine: int) -> None:
        """Take machine ``machine``'s link down (its bridge port): its packets are lost from now on."""
        _run("ip", "-n", self.switch, "link", "set", f"m{machine}", "down")

    def restore_link(self, machine: int) -> None:
        """Machine ``machine``'s link up again, shaped as the cluster was built."""
        _run("ip", "-n", self.switch, "link", "set", f"m{machine}", "up")
        self.shape_link(machine, self.rate, self.delay_ms)

    # ------------------------------------------------------------- processes
    def popen(self, machine: int, argv: list, env: dict | None = None, **kwargs) -> subprocess.Popen:
        """Start ``argv`` on machine ``machine`` (its network namespace and hostname), in a new session."""
        if not self._up:
            raise RuntimeError("EmulatedMachines.popen: the machines are not up (use the context manager)")
        ns = self.namespaces[machine]
        wrapper = [
            "ip",
            "netns",
            "exec",
            ns,
            "unshare",
            "--uts",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            self.hostname(machine),
            *map(str, argv),
        ]
        proc = subprocess.Popen(wrapper, env=env, start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def kill_machine(self, machine: int) -> None:
        """SIGKILL every process of machine ``machine`` at once (a machine that dies)."""
        for pid in _namespace_pids(self.namespaces[machine]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def parse_rate(rate: str) -> float:
    """Bits per second of a tc rate such as '100kbit' or '1gbit'; ValueError naming it otherwise."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate.lower())
    if not m:
        raise ValueError(f"emulated machines: rate must look like '100kbit', '1gbit', got {rate!r}")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def _burst_bytes(rate: str) -> int:
    """A tbf bucket of 4 ms at ``rate`` (at least 64 KiB): a 250 Hz timer tick refills it in time."""
    return max(64 * 1024, int(parse_rate(rate) / 8 * 0.004))
