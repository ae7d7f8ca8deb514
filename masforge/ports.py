"""Loopback ports for the servers masforge starts (the local model, llama.cpp, a test PostgreSQL)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A currently free TCP port on ``host`` (bind to port 0 and let the kernel pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
