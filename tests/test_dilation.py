"""Time-dilated links (bench/dilation.py, bench/emulated_training.py): D from a measured step, links at
rate / D. The link test needs root (network namespaces) and skips with the reason otherwise."""

import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ is no package
import dilation
import emulated_machines
from emulated_training import shaped_rate

PAYLOAD = 1_500_000  # bytes sent over the dilated link
RECEIVER = """
import socket, sys
server = socket.create_server(("0.0.0.0", 29555))
print("listening", flush=True)
conn, _ = server.accept()
got = 0
while got < int(sys.argv[1]):
    chunk = conn.recv(1 << 16)
    if not chunk:
        break
    got += len(chunk)
print(got, flush=True)
"""
SENDER = """
import socket, sys
with socket.create_connection((sys.argv[1], 29555), timeout=30) as s:
    s.sendall(b"x" * int(sys.argv[2]))
"""


def test_a_cluster_link_is_shaped_at_its_rate_over_d():
    assert shaped_rate("10gbit", 4) == "2500000kbit"
    assert shaped_rate("100gbit", 1000) == "100000kbit"
    assert emulated_machines.parse_rate(shaped_rate("10gbit", 3.7)) == pytest.approx(10e9 / 3.7, rel=1e-6)
    with pytest.raises(ValueError, match="--dilation must be positive"):
        shaped_rate("10gbit", 0)
    with pytest.raises(ValueError, match="rate must look like"):
        shaped_rate("10 gigabit", 2)


def test_the_t4_step_is_dgls_epoch_over_its_steps():
    assert dilation.T4_STEP_SECONDS == pytest.approx(73.6 / math.ceil(629_571 / 1024))


def test_a_measured_step_gives_wall_cpu_and_stage_seconds():
    got = dilation.measure(scale=0.002, fanouts=[3, 3], steps=2, warmup=1)
    assert len(got["wall"]) == len(got["cpu"]) == 2
    assert all(c > 0 for c in got["cpu"])
    assert {"sample", "forward", "backward"} <= set(got["stage_wall_median"])


@pytest.mark.skipif(emulated_machines.unavailable() is not None, reason=str(emulated_machines.unavailable()))
def test_a_dilated_link_carries_no_more_than_its_shaped_rate():
    """1.5 MB over a 10 Gbit/s link dilated by 1000 (10 Mbit/s) takes at least its bytes past the token
    bucket's burst over the rate (a lower bound only: load can only slow it down)."""
    rate = shaped_rate("10gbit", 1000)
    with emulated_machines.EmulatedMachines(2, rate=rate) as cluster:
        receiver = cluster.popen(
            1, [sys.executable, "-c", RECEIVER, PAYLOAD], stdout=subprocess.PIPE, text=True, bufsize=1
        )
        assert receiver.stdout.readline().strip() == "listening"
        start = time.monotonic()
        sender = cluster.popen(0, [sys.executable, "-c", SENDER, cluster.address(1), PAYLOAD])
        out, _ = receiver.communicate(timeout=60)
        elapsed = time.monotonic() - start
        assert sender.wait(timeout=30) == 0
    assert int(out.strip()) == PAYLOAD
    burst = emulated_machines._burst_bytes(rate)
    assert elapsed >= (PAYLOAD - burst) * 8 / emulated_machines.parse_rate(rate)
