"""``--address`` of the Ray executor is probed before Ray is asked to join it (DESIGN §4): a
``host:port`` where nothing listens fails in seconds with one line, where ``ray.init`` would
retry for minutes (measured: still retrying after 150 s on the old code).

Ray itself is not needed: ``probe_address`` only asks it which address it would connect to
(a stand-in here; the real one is used by the CLI test in ``tests/e2e/test_ray.py``).
"""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace

import pytest

from rulelab.sweep.executors import RayUnavailable, probe_address


def ray_rewriting(rewrite=lambda a: a):
    """A stand-in for the ray module: only the address canonicalization is used."""
    services = SimpleNamespace(canonicalize_bootstrap_address=rewrite)
    return SimpleNamespace(_private=SimpleNamespace(services=services))


@pytest.fixture
def listening():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def closed():
    with socket.socket() as s:  # a port just freed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_a_listening_address_passes(listening):
    probe_address(ray_rewriting(), listening)


def test_nothing_listening_fails_at_once_with_one_line(closed):
    t0 = time.monotonic()
    with pytest.raises(RayUnavailable) as err:
        probe_address(ray_rewriting(), closed)
    assert time.monotonic() - t0 < 6
    assert str(err.value) == (f"--address: no Ray cluster answers at {closed}: Connection "
                              "refused; start one with `ray start --head` or pass its address")


def test_the_address_ray_connects_to_is_probed_and_named(listening, closed):
    with pytest.raises(RayUnavailable, match=rf"at {listening} \(Ray connects to {closed}\)"):
        probe_address(ray_rewriting(lambda a: closed), listening)


@pytest.mark.parametrize("address", ["nohost", "host:", ":6379", "host:port"])
def test_a_malformed_address_names_the_flag(address):
    with pytest.raises(RayUnavailable, match=r"^--address: .* is not allowed; use host:port"):
        probe_address(ray_rewriting(), address)


@pytest.mark.parametrize("address", ["auto", "local", "ray://127.0.0.1:1"])
def test_addresses_resolved_by_ray_are_left_to_it(address):
    probe_address(ray_rewriting(lambda a: pytest.fail("probed")), address)
