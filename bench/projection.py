"""A model of one distributed training epoch: compute measured once, bytes counted exactly, links as
bandwidth and latency.

For a configuration (RAF or vanilla-METIS on some number of machines, one
worker each) the trainer runs the stages of a step one after another, and
a collective blocks until it completes (``gnnc.distributed.collectives``), so
nothing overlaps: a rank's epoch is the sum over stages of its compute and
of the stage's wire time, for every step. A stage's wire time per step is
the time its busiest link needs (each machine has one link to a switch,
shaped in each direction; the slowest machine holds every rank up in a
collective) plus one latency per round:

    wire(stage) = max over ranks of max(sent, received) * 8 * WIRE_OVERHEAD / bandwidth
                  + rounds(stage) * latency

with the bytes and rounds per step that the trainer's meter counts.
``WIRE_OVERHEAD`` is what the link carries beyond the payload the meter
counts: an Ethernet, IPv4 and TCP (with timestamps) header of 66 bytes per
1448-byte segment at MTU 1500.

``Profile.from_report`` reads a training report (``--report``); its
measured stage seconds minus the wire time of the link it ran on are the
compute (``Profile.compute``, per rank and stage, per epoch), or, with
``clock='cpu'``, its stages' CPU seconds (what they cost a core of their
own: waits for a core or a peer are not charged; the TCP stack's work for
the process is). ``predict``
then gives the epoch on any other link; ``dilated`` turns a cluster link
into the link that emulates it on a box whose compute is ``D`` times slower
(bandwidth / D, latency * D).
"""

from __future__ import annotations

from dataclasses import dataclass

WIRE_OVERHEAD = 1514 / 1448


@dataclass(frozen=True)
class Link:
    """A machine's link: ``bits_per_s`` each way and ``latency_s`` one-way per message."""

    bits_per_s: float
    latency_s: float = 0.0

    def __post_init__(self):
        if not self.bits_per_s > 0 or self.latency_s < 0:
            raise ValueError(f"Link: bandwidth must be positive and latency non-negative, got {self}")

    def dilated(self, factor: float) -> Link:
        """This link as emulated on a box ``factor`` times slower: bandwidth / factor, latency * factor."""
        if not factor > 0:
            raise ValueError(f"Link.dilated: the factor must be positive, got {factor}")
        return Link(self.bits_per_s / factor, self.latency_s * factor)


@dataclass
class Profile:
    """One configuration's epoch: ``steps``; per rank, per stage: ``compute`` seconds per epoch and
    ``sent`` / ``received`` bytes per step; per stage, ``rounds`` per step (the most of any rank)."""

    steps: float
    compute: list[dict]
    sent: list[dict]
    received: list[dict]
    rounds: dict

    def wire_per_step(self, link: Link) -> dict:
        """Seconds per step each stage spends on the wire (module docstring)."""
        stages = {s for r in self.sent + self.received for s in r} | set(self.rounds)
        return {
            s: max(max(r_sent.get(s, 0.0), r_recv.get(s, 0.0)) for r_sent, r_recv in zip(self.sent, self.received))
            * 8
            * WIRE_OVERHEAD
            / link.bits_per_s
            + self.rounds.get(s, 0.0) * link.latency_s
            for s in stages
        }

    def predict(self, link: Link) -> float:
        """Epoch seconds on ``link``: the slowest rank's compute plus every stage's wire time, every step."""
        wire = sum(self.wire_per_step(link).values()) * self.steps
        return max(sum(c.values()) for c in self.compute) + wire

    def stage_seconds(self, link: Link) -> dict:
        """Predicted epoch seconds by stage (the slowest rank's compute per stage, plus its wire time)."""
        wire = self.wire_per_step(link)
        stages = set(wire) | {s for c in self.compute for s in c}
        return {s: max(c.get(s, 0.0) for c in self.compute) + wire.get(s, 0.0) * self.steps for s in stages}

    def scaled(self, compute_factor: float) -> Profile:
        """The same traffic with every compute time divided by ``compute_factor`` (a faster machine)."""
        compute = [{s: v / compute_factor for s, v in c.items()} for c in self.compute]
        return Profile(self.steps, compute, self.sent, self.received, self.rounds)

    @classmethod
    def traffic(cls, report: dict, epoch: int = -1) -> Profile:
        """Steps, bytes and rounds of epoch ``epoch`` of a training report (``--report``); no compute."""
        ranks = report["epochs"][epoch]["ranks"]
        rounds: dict = {}
        for r in ranks:
            for s, v in r.get("rounds_per_step", {}).items():
                rounds[s] = max(rounds.get(s, 0.0), v)
        return cls(
            float(report["epochs"][epoch]["steps"]),
            [{} for _ in ranks],
            [dict(r["sent_per_step"]) for r in ranks],
            [dict(r["received_per_step"]) for r in ranks],
            rounds,
        )

    @classmethod
    def from_report(cls, report: dict, link: Link, epoch: int = -1, clock: str = "wall") -> Profile:
        """The profile of epoch ``epoch`` of a training report measured on ``link``: its bytes and rounds,
        and as compute its stage seconds less their modelled wire time (``clock='wall'``) or its stages'
        CPU seconds (``clock='cpu'``)."""
        if clock not in ("wall", "cpu"):
            raise ValueError(f"Profile.from_report: clock must be 'wall' or 'cpu', got {clock!r}")
        profile = cls.traffic(report, epoch)
        ranks = report["epochs"][epoch]["ranks"]
        if clock == "cpu":
            profile.compute = [dict(r["cpu_seconds"]) for r in ranks]
            return profile
        wire = profile.wire_per_step(link)
        profile.compute = [
            {s: max(v - wire.get(s, 0.0) * profile.steps, 0.0) for s, v in r["seconds"].items()} for r in ranks
        ]
        return profile

    def with_traffic(self, report: dict, epoch: int = -1) -> Profile:
        """This profile's compute per step (the slowest rank's, by stage) over the steps of ``report``'s
        epoch, with that report's bytes and rounds: another machine count whose compute was not measured."""
        stages = {k for c in self.compute for k in c}
        other = Profile.traffic(report, epoch)
        other.compute = [{s: max(c.get(s, 0.0) for c in self.compute) / self.steps * other.steps for s in stages}]
        return other


def crossover(ratio_at, factors) -> float | None:
    """The first factor of ``factors`` (ascending) where ``ratio_at(factor)`` reaches 2, interpolated
    linearly between the two factors around it; None if it never does."""
    previous = None
    for f in factors:
        r = ratio_at(f)
        if r >= 2.0:
            if previous is None:
                return f
            f0, r0 = previous
            return f0 + (2.0 - r0) * (f - f0) / (r - r0)
        previous = (f, r)
    return None
