"""``PeerFailure``, the error a collective raises when a peer died or did not answer in time, and how such
errors name machines: this one (``machine_name``) and the peers a gloo error mentions (``peer_machines``)."""

from __future__ import annotations

import os
import re
import socket


class PeerFailure(RuntimeError):
    """A collective failed: a peer process died or did not answer in time."""


def machine_name() -> str:
    """This process's machine as errors name it: hostname, and torchrun's node rank when torchrun started it."""
    node = os.environ.get("GROUP_RANK")
    return socket.gethostname() + (f" (node {node})" if node is not None else "")


_ADDRESS = re.compile(r"\[?(\d{1,3}(?:\.\d{1,3}){3})\]?:\d+")


def peer_machines(error: str) -> str:
    """'; peer <host> (<address>)' for each address:port a gloo error names, other than this machine's."""
    mine = {"127.0.0.1"}
    try:
        mine |= set(socket.gethostbyname_ex(socket.gethostname())[2])
    except OSError:
        pass
    found = []
    for address in dict.fromkeys(_ADDRESS.findall(error)):
        if address in mine:
            continue
        try:
            host = socket.gethostbyaddr(address)[0]
        except OSError:
            host = "unknown host"
        found.append(f"; peer {host} ({address})")
    return "".join(found)
